package resultcache

import (
	"encoding/binary"
	"math"
	"time"
)

// Key identifies a cached result: two reads share an entry (or a read in
// flight) exactly when their keys are equal.
type Key struct {
	Backend string
	SQL     string
	// Params are the bound parameters, typed: int64(1) and "1" are different
	// keys. The types are wire's (nil, bool, int64, uint64, float64, string,
	// []byte) plus int and int32, taken as int64. A read with a parameter of
	// any other type is run, never cached nor merged.
	Params []any
	// Profile is the identity of the client's session settings (time_zone,
	// sql_mode, character set...): any comparable value, equal for two
	// clients only if their settings make the statement return the same
	// bytes, e.g. the pool's interned *sqlpool.Profile (nil: the baseline).
	// It is compared with ==, and held by the cache while an entry lives.
	// A value that is not comparable (a slice, a map) panics.
	Profile any
	// Columnar and TimeFormat are the reply's form (wire.Request's fields).
	Columnar   bool
	TimeFormat string
}

// mapKey is the key of the entries and flights maps: the profile, and
// everything else of a Key encoded into text. The map compares the whole key
// on a lookup, so a hash collision can never serve another key's value.
type mapKey struct {
	profile any
	text    string
}

// Parameter tags in the encoded text: the type is part of the key.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt
	tagUint
	tagFloat
	tagString
	tagBytes
)

// appendKey encodes k but its profile into b: every variable-length part is
// length-prefixed, so no two keys encode alike. ok is false when a parameter
// has a type that cannot be keyed.
func appendKey(b []byte, k *Key) (_ []byte, ok bool) {
	b = appendString(b, k.Backend)
	b = appendString(b, k.SQL)
	b = binary.AppendUvarint(b, uint64(len(k.Params)))
	for _, p := range k.Params {
		switch v := p.(type) {
		case nil:
			b = append(b, tagNil)
		case bool:
			if v {
				b = append(b, tagTrue)
			} else {
				b = append(b, tagFalse)
			}
		case int64:
			b = binary.LittleEndian.AppendUint64(append(b, tagInt), uint64(v))
		case int:
			b = binary.LittleEndian.AppendUint64(append(b, tagInt), uint64(int64(v)))
		case int32:
			b = binary.LittleEndian.AppendUint64(append(b, tagInt), uint64(int64(v)))
		case uint64:
			b = binary.LittleEndian.AppendUint64(append(b, tagUint), v)
		case float64:
			b = binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(v))
		case string:
			b = appendString(append(b, tagString), v)
		case []byte:
			b = binary.AppendUvarint(append(b, tagBytes), uint64(len(v)))
			b = append(b, v...)
		default:
			return b, false
		}
	}
	if k.Columnar {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return appendString(b, k.TimeFormat), true
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Read is what Begin needs of a read: its key, and what storing its result
// needs. Begin copies what it keeps (nothing of Read but Profile and the
// Waiter is referenced once it returns).
type Read struct {
	Key
	// Tables are the tables the statement reads, named as the writes that
	// invalidate them name them (the same normalisation on both sides:
	// case, schema qualification). Empty means it reads none (SELECT 1).
	Tables []string
	// AllTables says the tables read are not known: the entry is dropped by
	// any invalidation on its backend, and Tables is ignored.
	AllTables bool
	// Also names a second backend the result depends on (a join reads two):
	// any invalidation of it, of any table, drops the entry too, and a read
	// in flight across one is not stored.
	Also string
	// TTL is how long the result may be served: 0 means the read opted out
	// of caching (it is neither served from the cache nor stored; it still
	// merges with identical reads in flight).
	TTL time.Duration
}
