package sqlpool

import "github.com/tether-php/tether/backend/loopsql"

// The request contract lives in backend/loopsql, which the server imports
// too; these aliases keep the pool's and the protocols' code short.
type (
	Request = loopsql.Request
	Kind    = loopsql.Kind
	Report  = loopsql.Report
	Setting = loopsql.Setting
	Profile = loopsql.Profile
	Client  = loopsql.Client
	Tx      = loopsql.Tx
	Diff    = loopsql.Diff
)

// The kinds of request (loopsql).
const (
	KindQuery    = loopsql.KindQuery
	KindExec     = loopsql.KindExec
	KindBegin    = loopsql.KindBegin
	KindCommit   = loopsql.KindCommit
	KindRollback = loopsql.KindRollback
	KindApply    = loopsql.KindApply
	KindReset    = loopsql.KindReset
	KindProbe    = loopsql.KindProbe
)

// DiffProfiles returns what takes a session with settings from to settings to.
func DiffProfiles(from, to *Profile) Diff { return loopsql.DiffProfiles(from, to) }
