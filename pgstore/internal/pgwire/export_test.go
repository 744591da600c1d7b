package pgwire

// Params are the bundle's encoded arguments, as Run sends them.
func (b *Bundle) Params() [][]byte { return b.params[:] }
