package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// CPUSeconds is the user+system CPU time of a process so far.
func CPUSeconds(pid int) (float64, error) {
	st, err := ReadStat(pid)
	return st.cpu, err
}

// Stat is what queenbench reads of /proc/<pid>/stat.
type Stat struct {
	PPID int
	// cpu is the process's own user+system seconds; reapedCPU its
	// children's that have exited and been waited for.
	cpu, reapedCPU float64
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	// The command name may contain spaces; fields start after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 15 {
		return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	// Fields 4 (ppid) and 14-17 of stat (utime, stime, cutime, cstime)
	// are 1 and 11-14 after ')'.
	var ticks [4]float64
	for k := range ticks {
		if ticks[k], err = strconv.ParseFloat(fields[11+k], 64); err != nil {
			return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
		}
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return Stat{PPID: ppid, cpu: (ticks[0] + ticks[1]) / clockTicks, reapedCPU: (ticks[2] + ticks[3]) / clockTicks}, nil
}

// TreeCPUSeconds is the CPU time of a process and of all its
// children so far, those running and those gone: a PostgreSQL server's
// postmaster, its backends (one per connection, however short-lived)
// and its background workers.
func TreeCPUSeconds(root int) (float64, error) {
	st, err := ReadStat(root)
	if err != nil {
		return 0, err
	}
	total := st.cpu + st.reapedCPU
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		if child, err := ReadStat(pid); err == nil && child.PPID == root {
			total += child.cpu // a child gone meanwhile is in reapedCPU next time
		}
	}
	return total, nil
}

// PeakRSS is the process's peak resident set (VmHWM) in bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// OwnCPUSeconds is the user+system CPU time of this process so far, all
// its threads: getrusage's, to the microsecond, where /proc counts
// 10 ms ticks.
func OwnCPUSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	seconds := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return seconds(ru.Utime) + seconds(ru.Stime), nil
}
