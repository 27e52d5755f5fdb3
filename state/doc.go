// Package state holds Cairn's state model: the state document, field
// schemas and their reducers, RFC 6902 patches, typed state over Go structs,
// the QitOS built-in fields, schema versions with migrations, and the
// key-value section shared by agents and tools.
//
// # The document
//
// A state is a JSON object ([Doc]). A Doc is immutable: applying an update or
// a patch returns a new Doc and leaves the old one untouched, and versions
// share structure. Appending one element to a list of n elements costs the
// same whatever n is; an old version stays readable after newer versions
// were derived from it (history walks and forks rely on this).
//
// # Updates and reducers
//
// Nodes return partial updates ([Update]). A [Schema] names, for each
// top-level field, the reducer that merges an update into the current value:
// replace (the default), append, messages (LangGraph's add_messages), merge
// (shallow object merge, null deletes) and add (numbers). Custom reducers are
// registered by name on a schema. [Schema.Apply] returns the new document and
// the [Patch] that describes the change, in time proportional to the update.
//
// # Patches and encodings
//
// A [Patch] is a list of RFC 6902 operations. [Doc.Apply] replays one; a
// patch marshals to standard RFC 6902 JSON. [EncodePatch] and [EncodeDoc]
// give the compact binary forms the stores write; [DecodePatch] and
// [DecodeDoc] reject malformed input with [ErrCorrupt], never panic.
//
// # Caveats
//
// Values inside a Doc are kept as compact JSON text and decoded on demand.
// The merge reducer copies the object it merges into (time proportional to
// the number of keys of that field). A custom reducer ([WithReducer])
// sees and returns the field's whole value, and its step's patch replaces
// the whole field: it costs time and stored bytes proportional to the
// field, every step — the built-in reducers write only what changed, so
// prefer them for fields that grow. Numbers keep their JSON text, so
// integers never turn into floats.
package state
