package jsontext

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 1.25e-6, 1e-7, 123456.789, 1e20, 1e21, -3e-9, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1)} {
		got, ok := AppendFloat(nil, f)
		want, err := json.Marshal(f)
		switch {
		case ok && (err != nil || !bytes.Equal(got, want)):
			t.Errorf("%v: got %s, encoding/json %s (%v)", f, got, want, err)
		case !ok && err == nil && math.Abs(f) >= 1e-6 && math.Abs(f) < 1e21:
			t.Errorf("%v: refused a float written without an exponent", f)
		}
	}
}

// FuzzAppend checks both appenders against encoding/json byte for byte.
func FuzzAppend(f *testing.F) {
	f.Add("plain", 1.5)
	f.Add("<a href=\"x\">&amp;</a>\n\t\u2028\xff", -0.000123)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
		}
		if got, ok := AppendFloat([]byte("x"), x); ok {
			want, err := json.Marshal(x)
			if err != nil || !bytes.Equal(got[1:], want) {
				t.Fatalf("%v: got %s, encoding/json %s (%v)", x, got[1:], want, err)
			}
		}
	})
}
