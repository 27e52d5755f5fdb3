package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/cairn-dev/cairn/store"
	"github.com/google/uuid"
)

// AssistantRecord is an assistant as the API shows it: one of the
// service's own (a Go graph, an agent or pipeline file: a system
// assistant, metadata.created_by "system", its id its graph's), or one a
// client made from a graph (CreateAssistant) with its own config,
// context, name and metadata, kept in versions in the store. Versions
// lists hold one record per version.
type AssistantRecord struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Version     int            `json:"version"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at,omitempty"`
	// latest is the highest version ever made (SetLatest may choose an
	// older one as the assistant's); not shown.
	latest int
}

// AssistantCreate is the body of POST /assistants.
type AssistantCreate struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	// IfExists is "raise" (the default: ErrExists) or "do_nothing"
	// (the existing assistant is returned).
	IfExists string `json:"if_exists"`
}

// AssistantPatch is the body of PATCH /assistants/{id}: the fields given
// replace the assistant's (metadata is merged into its), and the result
// is a new version, the assistant's latest.
type AssistantPatch struct {
	GraphID     *string        `json:"graph_id"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Name        *string        `json:"name"`
	Description *string        `json:"description"`
}

// ErrExists: an assistant of that id exists already (POST /assistants
// with if_exists raise, or an id a system assistant has).
var ErrExists = errors.New("runs: already exists")

// registry keeps the assistants clients made, as items of each tenant's
// system tenant (store.SystemTenant): the assistant under ["current"],
// each version under ["versions", id].
type registry struct {
	items store.ItemStore
}

const assistantKind = "assistants"

func (r registry) tenant(ctx context.Context) string {
	return store.SystemTenant(assistantKind, TenantOf(ctx))
}

func versionKey(v int) string { return fmt.Sprintf("%010d", v) }

// toValue turns a record into an item's value (latest kept as a field).
func toValue(a AssistantRecord) map[string]any {
	m := mustObject(a)
	m["latest_version"] = a.latest
	return m
}

func fromValue(v map[string]any) (AssistantRecord, error) {
	var a AssistantRecord
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		return a, fmt.Errorf("%w: a stored assistant: %v", store.ErrCorrupt, err)
	}
	if n, ok := v["latest_version"].(json.Number); ok {
		l, _ := n.Int64()
		a.latest = int(l)
	}
	return a, nil
}

func (r registry) get(ctx context.Context, id string) (AssistantRecord, error) {
	if r.items == nil {
		return AssistantRecord{}, newError(ErrNotFound, "Assistant not found: %q", id)
	}
	it, err := r.items.Get(ctx, store.GetOp{Tenant: r.tenant(ctx), Namespace: []string{"current"}, Key: id, NoRefresh: true})
	if errors.Is(err, store.ErrNotFound) {
		return AssistantRecord{}, newError(ErrNotFound, "Assistant not found: %q", id)
	}
	if err != nil {
		return AssistantRecord{}, err
	}
	return fromValue(it.Value)
}

// write stores a as the assistant and, when version is set, as that
// version, claimed: ErrConflict if a racing writer made it first.
func (r registry) write(ctx context.Context, a AssistantRecord, version bool, claimCurrent bool) error {
	if r.items == nil {
		return newError(ErrState, "this store keeps no items, where assistants made from a graph are kept")
	}
	t := r.tenant(ctx)
	ops := []store.ItemOp{store.PutOp{Tenant: t, Namespace: []string{"current"}, Key: a.AssistantID, Value: toValue(a), NoIndex: true, IfAbsent: claimCurrent}}
	if version {
		v := a
		v.UpdatedAt = ""
		ops = append(ops, store.PutOp{Tenant: t, Namespace: []string{"versions", a.AssistantID}, Key: versionKey(a.Version), Value: toValue(v), NoIndex: true, IfAbsent: true})
	}
	_, err := r.items.Batch(ctx, ops)
	return err
}

// all lists the records under a namespace of the caller's tenant.
func (r registry) all(ctx context.Context, ns ...string) ([]AssistantRecord, error) {
	var out []AssistantRecord
	for off := 0; r.items != nil; off += 1000 {
		items, err := r.items.Search(ctx, store.SearchOp{Tenant: r.tenant(ctx), Prefix: ns, Limit: 1000, Offset: off})
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if len(it.Namespace) != len(ns) {
				continue // under a deeper namespace
			}
			a, err := fromValue(it.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		if len(items) < 1000 {
			return out, nil
		}
	}
	return out, nil
}

// CreateAssistant makes an assistant from one of the service's graphs.
func (s *Service) CreateAssistant(ctx context.Context, q AssistantCreate) (AssistantRecord, error) {
	if err := OneOf("$.if_exists", q.IfExists, "raise", "do_nothing"); err != nil {
		return AssistantRecord{}, err
	}
	g, ok := s.assistants[q.GraphID]
	if q.GraphID == "" || !ok {
		return AssistantRecord{}, invalid("$.graph_id", "%q is not a graph this server serves (%s)", q.GraphID, strings.Join(s.order, ", "))
	}
	id := cmp.Or(q.AssistantID, uuid.NewString())
	if err := store.ValidateID(id); err != nil {
		return AssistantRecord{}, invalid("$.assistant_id", "%v", err)
	}
	if _, sys := s.assistants[id]; sys {
		return AssistantRecord{}, newError(ErrExists, "Assistant already exists: %q is a system assistant", id)
	}
	now := APITime(s.cfg.Now())
	a := AssistantRecord{AssistantID: id, GraphID: q.GraphID, Config: emptyIfNil(q.Config), Context: emptyIfNil(q.Context), Metadata: emptyIfNil(q.Metadata),
		Name: cmp.Or(q.Name, g.Info().ID), Description: q.Description, Version: 1, CreatedAt: now, UpdatedAt: now, latest: 1}
	err := s.registry.write(ctx, a, true, true)
	if errors.Is(err, store.ErrConflict) {
		if q.IfExists == "do_nothing" {
			return s.registry.get(ctx, id)
		}
		return AssistantRecord{}, newError(ErrExists, "Assistant already exists: %q", id)
	}
	return a, err
}

func emptyIfNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// GetAssistant returns an assistant: a system one by its graph id, or one
// a client made.
func (s *Service) GetAssistant(ctx context.Context, id string) (AssistantRecord, error) {
	if a, ok := s.assistants[id]; ok {
		return s.systemRecord(a), nil
	}
	return s.registry.get(ctx, id)
}

// systemRecord is the record of one of the service's own assistants.
func (s *Service) systemRecord(a Assistant) AssistantRecord {
	info := a.Info()
	md := maps.Clone(info.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	md["created_by"] = "system"
	at := cmp.Or(APITime(info.CreatedAt), APITime(s.started))
	desc := &info.Description
	if info.Description == "" {
		desc = nil
	}
	def := s.cfg.Defaults[info.ID]
	return AssistantRecord{AssistantID: info.ID, GraphID: info.ID, Config: emptyIfNil(def.Config), Context: emptyIfNil(def.Context), Metadata: md,
		Name: cmp.Or(info.Name, info.ID), Description: desc, Version: 1, CreatedAt: at, UpdatedAt: at}
}

// PatchAssistant makes a new version of an assistant a client made, from
// its latest and the patch, and makes it the assistant's.
func (s *Service) PatchAssistant(ctx context.Context, id string, p AssistantPatch) (AssistantRecord, error) {
	if _, sys := s.assistants[id]; sys {
		return AssistantRecord{}, newError(ErrState, "assistant %q is a system assistant (its file or its Go code defines it); create one from its graph to configure it", id)
	}
	if p.GraphID != nil {
		if _, ok := s.assistants[*p.GraphID]; !ok {
			return AssistantRecord{}, invalid("$.graph_id", "%q is not a graph this server serves (%s)", *p.GraphID, strings.Join(s.order, ", "))
		}
	}
	for range 100 {
		a, err := s.registry.get(ctx, id)
		if err != nil {
			return a, err
		}
		a.patch(p)
		a.latest++
		a.Version, a.UpdatedAt = a.latest, APITime(s.cfg.Now())
		if err = s.registry.write(ctx, a, true, false); !errors.Is(err, store.ErrConflict) {
			return a, err
		}
		// A racing patch made this version first: read again.
	}
	return AssistantRecord{}, newError(ErrBusy, "assistant %q: too many racing updates", id)
}

func (a *AssistantRecord) patch(p AssistantPatch) {
	if p.GraphID != nil {
		a.GraphID = *p.GraphID
	}
	if p.Config != nil {
		a.Config = p.Config
	}
	if p.Context != nil {
		a.Context = p.Context
	}
	if p.Name != nil {
		a.Name = *p.Name
	}
	if p.Description != nil {
		a.Description = p.Description
	}
	if p.Metadata != nil {
		md := maps.Clone(a.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		maps.Copy(md, p.Metadata)
		a.Metadata = md
	}
}

// SetLatestVersion makes one of an assistant's versions the assistant's.
func (s *Service) SetLatestVersion(ctx context.Context, id string, version int) (AssistantRecord, error) {
	a, err := s.registry.get(ctx, id)
	if err != nil {
		return a, err
	}
	it, err := s.registry.items.Get(ctx, store.GetOp{Tenant: s.registry.tenant(ctx), Namespace: []string{"versions", id}, Key: versionKey(version), NoRefresh: true})
	if errors.Is(err, store.ErrNotFound) {
		return a, newError(ErrNotFound, "Assistant version not found: %q has no version %d", id, version)
	}
	if err != nil {
		return a, err
	}
	v, err := fromValue(it.Value)
	if err != nil {
		return a, err
	}
	v.CreatedAt, v.UpdatedAt, v.latest = a.CreatedAt, APITime(s.cfg.Now()), a.latest
	return v, s.registry.write(ctx, v, false, false)
}

// AssistantVersions lists an assistant's versions, newest first, those
// whose metadata holds md.
func (s *Service) AssistantVersions(ctx context.Context, id string, md map[string]any, limit, offset int) ([]AssistantRecord, error) {
	if a, ok := s.assistants[id]; ok {
		return pageOf([]AssistantRecord{s.systemRecord(a)}, limit, offset), nil
	}
	if _, err := s.registry.get(ctx, id); err != nil {
		return nil, err
	}
	all, err := s.registry.all(ctx, "versions", id)
	if err != nil {
		return nil, err
	}
	var out []AssistantRecord
	for _, v := range all {
		if Contains(v.Metadata, md) {
			out = append(out, v)
		}
	}
	sortRecords(out, "version", "desc")
	return pageOf(out, limit, offset), nil
}

// DeleteAssistant deletes an assistant a client made, with its versions;
// with threads, the threads whose metadata names it too. Its runs keep
// their records (a run's history outlives what ran it).
func (s *Service) DeleteAssistant(ctx context.Context, id string, threads bool) error {
	if _, sys := s.assistants[id]; sys {
		return newError(ErrState, "assistant %q is a system assistant (its file or its Go code defines it); it cannot be deleted", id)
	}
	if _, err := s.registry.get(ctx, id); err != nil {
		return err
	}
	var ths []store.Thread
	if threads {
		var err error
		if ths, err = s.store.ListThreads(ctx, store.ThreadSearch{Tenant: TenantOf(ctx), Metadata: map[string]any{"assistant_id": id}}); err != nil {
			return err
		}
		for _, th := range ths {
			if s.Busy(ctx, th.ID) {
				return newError(ErrBusy, "thread %q of assistant %q has a run in progress; cancel it first (nothing was deleted)", APIThreadID(th.ID), id)
			}
		}
	}
	versions, err := s.registry.all(ctx, "versions", id)
	if err != nil {
		return err
	}
	t := s.registry.tenant(ctx)
	ops := []store.ItemOp{store.DeleteOp{Tenant: t, Namespace: []string{"current"}, Key: id}}
	for _, v := range versions {
		ops = append(ops, store.DeleteOp{Tenant: t, Namespace: []string{"versions", id}, Key: versionKey(v.Version)})
	}
	if _, err := s.registry.items.Batch(ctx, ops); err != nil {
		return err
	}
	for _, th := range ths {
		if err := s.store.DeleteThread(ctx, th.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// resolve finds the assistant a run names: a system one by its id, or
// one the caller's tenant made (then its record too).
func (s *Service) resolve(ctx context.Context, id string) (Assistant, *AssistantRecord, error) {
	if a, ok := s.assistants[id]; ok {
		if _, ok := s.cfg.Defaults[id]; ok {
			rec := s.systemRecord(a)
			return a, &rec, nil
		}
		return a, nil, nil
	}
	rec, err := s.registry.get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, newError(ErrNotFound, "No assistant found for %q. Make sure the assistant ID is for a valid assistant or a valid graph ID (have %s).", id, strings.Join(s.order, ", "))
	}
	if err != nil {
		return nil, nil, err
	}
	a, ok := s.assistants[rec.GraphID]
	if !ok {
		return nil, nil, newError(ErrState, "assistant %q runs graph %q, which this server no longer serves (%s)", id, rec.GraphID, strings.Join(s.order, ", "))
	}
	if def, ok := s.cfg.Defaults[rec.GraphID]; ok {
		base := AssistantRecord{Config: def.Config, Context: def.Context}
		rec.Config = toValueMap(base.runConfig(configOf(rec.Config)))
		rec.Context = merged(def.Context, rec.Context)
	}
	return a, &rec, nil
}

// runConfig is a run's config over the assistant's: the request's
// configurable members, tags and metadata over the assistant's, its
// recursion limit when it sets one.
func (a *AssistantRecord) runConfig(req *RunConfig) *RunConfig {
	var base RunConfig
	if c := configOf(a.Config); c != nil {
		base = *c
	}
	if req == nil {
		req = &RunConfig{}
	}
	out := *req
	out.Configurable = merged(base.Configurable, req.Configurable)
	out.Metadata = merged(base.Metadata, req.Metadata)
	if out.Tags == nil {
		out.Tags = base.Tags
	}
	out.RecursionLimit = cmp.Or(req.RecursionLimit, base.RecursionLimit)
	if out.Configurable == nil && out.Metadata == nil && out.Tags == nil && out.RecursionLimit == 0 && out.RunName == "" && out.MaxConcurrency == 0 {
		return nil
	}
	return &out
}

// runContext is a run's context over the assistant's, member by member.
func (a *AssistantRecord) runContext(req json.RawMessage) json.RawMessage {
	if len(a.Context) == 0 {
		return req
	}
	var m map[string]any
	_ = json.Unmarshal(req, &m)                // checked: an object or nothing
	b, _ := json.Marshal(merged(a.Context, m)) // JSON values always marshal
	return b
}

func merged(base, over map[string]any) map[string]any {
	if base == nil {
		return over
	}
	out := maps.Clone(base)
	maps.Copy(out, over)
	return out
}

// AssistantGraph returns the served assistant (the graph) an assistant
// id names: a system assistant's own, or the graph of one the caller's
// tenant made.
func (s *Service) AssistantGraph(ctx context.Context, id string) (Assistant, error) {
	a, _, err := s.resolve(ctx, id)
	return a, err
}

// GraphDefaults are a graph's default config and context (Config.Defaults).
type GraphDefaults struct {
	Config  map[string]any `json:"config"`
	Context map[string]any `json:"context"`
}

// configOf reads a stored config as a RunConfig (nil when it is empty).
func configOf(m map[string]any) *RunConfig {
	if len(m) == 0 {
		return nil
	}
	var c RunConfig
	if b, err := json.Marshal(m); err == nil {
		_ = json.Unmarshal(b, &c) // a stored config that is not a RunConfig adds nothing
	}
	return &c
}

// toValueMap is a RunConfig as a stored config's map (empty for nil).
func toValueMap(c *RunConfig) map[string]any {
	out := map[string]any{}
	if c == nil {
		return out
	}
	b, _ := json.Marshal(c) // a RunConfig always marshals
	_ = json.Unmarshal(b, &out)
	return out
}

// ParseGraphDefaults reads graphs' default configs as LangGraph's
// LANGGRAPH_CONFIG holds them: an object by graph id of configs
// (configurable, tags, metadata, recursion_limit…), each whose "context"
// member is the graph's default context.
func ParseGraphDefaults(data []byte) (map[string]GraphDefaults, error) {
	var raw map[string]map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, invalid("$", "want an object of configs by graph id: %v", err)
	}
	out := map[string]GraphDefaults{}
	for id, cfg := range raw {
		d := GraphDefaults{Config: maps.Clone(cfg)}
		if c, ok := cfg["context"]; ok {
			m, isObj := c.(map[string]any)
			if !isObj && c != nil {
				return nil, invalid("$."+id+".context", "want an object (the graph's default context)")
			}
			d.Context = m
			delete(d.Config, "context")
		}
		if cc, ok := d.Config["configurable"]; ok {
			if _, isObj := cc.(map[string]any); !isObj && cc != nil {
				return nil, invalid("$."+id+".configurable", "want an object")
			}
		}
		out[id] = d
	}
	return out, nil
}
