package state

// Where the bytes of an encoded patch or document go, field by field, for
// a store's storage report: these read the length prefixes of the binary
// forms (EncodePatch, EncodeDoc) and build no value, so measuring costs one
// pass over the bytes and no state is materialised.

// PatchFieldBytes calls add, for each operation of an encoded patch, with
// the top-level field its path's first token names ("" for an operation
// on the whole document) and the bytes of the operation's encoding. The
// patch's header (its format and operation count) is counted for no field.
func PatchFieldBytes(data []byte, add func(field string, n int)) error {
	r := reader{b: data}
	if v := r.byte(); r.err == nil && v != patchFormatV1 {
		r.fail("patch format %d", v)
	}
	n := r.count(2)
	for i := 0; i < n && r.err == nil; i++ {
		start := r.off
		code := r.byte()
		if r.err == nil && (int(code) >= len(opNames) || opNames[code] == "") {
			r.fail("unknown op code %d", code)
			break
		}
		path := r.bytes()
		switch opNames[code] {
		case OpMove, OpCopy, OpAdd, OpReplace, OpTest:
			r.bytes() // from, or the value
		}
		if r.err == nil {
			field, _, _ := splitPointer(string(path))
			add(field, r.off-start)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// DocFieldBytes calls add, for each top-level field of an encoded document,
// with the field's name and the bytes of its encoding (name, form and
// value). The document's header is counted for no field.
func DocFieldBytes(data []byte, add func(field string, n int)) error {
	r := reader{b: data}
	if v := r.byte(); r.err == nil && v != docFormatV1 {
		r.fail("document format %d", v)
	}
	n := r.count(2)
	for i := 0; i < n && r.err == nil; i++ {
		start := r.off
		name := r.bytes()
		switch form := r.byte(); form {
		case formRaw:
			r.bytes()
		case formList:
			k := r.count(1)
			for j := 0; j < k && r.err == nil; j++ {
				r.bytes()
			}
		case formObject:
			k := r.count(2)
			for j := 0; j < k && r.err == nil; j++ {
				r.bytes()
				r.bytes()
			}
		default:
			r.fail("unknown field form %d", form)
		}
		if r.err == nil {
			add(string(name), r.off-start)
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}
