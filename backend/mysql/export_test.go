package mysql

// SetStaleHook makes the execute of every statement for which fn returns true
// answer ER_NEED_REPREPARE (the statement does not run), until restore is
// called.
func SetStaleHook(fn func(sql string) bool) (restore func()) {
	testHookStale.Store(&fn)
	return func() { testHookStale.Store(nil) }
}

// CutParams is cutParams: the DSN without tetherd's own parameters, and
// those.
var CutParams = cutParams
