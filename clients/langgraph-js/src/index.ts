// A LangGraph JS checkpointer whose storage is Cairn, through `cairn serve`.
// See docs/langgraph-saver.md in the Cairn repository.
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";

/** Options of a {@link CairnSaver}. */
export interface CairnSaverOptions {
  /** The address of `cairn serve`, e.g. http://127.0.0.1:8123. */
  url: string;
  /** An API key (`cairn keys create`) when the server asks for one. */
  apiKey?: string;
  /** The serializer of channel values (default: LangGraph's JsonPlusSerializer). */
  serde?: SerializerProtocol;
  /** Checkpoints read per request while listing (default 50, at most 100). */
  pageSize?: number;
  /** The fetch function (default: the global one). */
  fetch?: typeof fetch;
}

/** A request Cairn refused or could not answer. */
export class CairnError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** Where in the request the problem is (422s), e.g. $.thread_id. */
  readonly path?: string;
  constructor(status: number, message: string, path?: string) {
    super(message);
    this.name = "CairnError";
    this.status = status;
    this.path = path;
  }
}

/**
 * Another writer put a checkpoint on the thread since this one read it: the
 * put's parent is no longer the head (HTTP 409). Nothing was stored; read
 * the thread again and decide.
 */
export class CairnConflictError extends CairnError {
  constructor(message: string) {
    super(409, message);
    this.name = "CairnConflictError";
  }
}

/** Options of {@link CairnSaver.prune}. */
export interface PruneOptions {
  /** keep_latest (default) keeps the newest checkpoints; delete deletes the threads. */
  strategy?: "keep_latest" | "delete";
  /** With keep_latest, how many of each branch of each namespace to keep (default 1). */
  keepLast?: number;
}

/** What {@link CairnSaver.prune} deleted. */
export interface PruneResult {
  threads: number;
  checkpoints: number;
  bytes: number;
  deleted: string[] | null;
  busy: string[] | null;
}

// A stored value that is not plain JSON: {"__lg_typed__": type, "b64": …},
// or JSON holding the marker itself: {"__lg_typed__": "json", "value": …}.
const TYPED = "__lg_typed__";

interface Header {
  v: number;
  id: string;
  ts: string;
  channel_versions: ChannelVersions;
  versions_seen: Record<string, ChannelVersions>;
}

interface WireWrite {
  task_id: string;
  channel: string;
  idx: number;
  task_path?: string;
  value: unknown;
}

interface WireTuple {
  thread_id: string;
  checkpoint_ns: string;
  seq: number;
  checkpoint: Header;
  metadata?: unknown;
  parent_id?: string;
  channels: Record<string, unknown>;
  pending_writes: WireWrite[];
  // In a batch: list channels that are the first len elements of the same
  // channel of tuple `of` of the batch.
  shared?: Record<string, { of: number; len: number }>;
}

interface WireRef {
  thread_id: string;
  checkpoint_ns: string;
  seq: number;
  checkpoint_id: string;
}

// What the saver knows of the newest checkpoint it put or read on a thread
// namespace: the serialized elements of its list channels, so the next put
// sends only what a list gained.
interface Head {
  id: string;
  lists: Map<string, List>;
}

// A list channel's elements and their serialized text.
interface List {
  objs: unknown[];
  texts: string[];
}

const HEADS_MAX = 256;

/** The number of leading elements of b that are the elements of a. */
function sharedPrefix(a: unknown[], b: unknown[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
const LANDED_MAX = 4096;
// How long writes wait for the put of their checkpoint.
const WAIT_MS = 30_000;

/**
 * A LangGraph checkpointer that stores checkpoints in Cairn: a checkpoint's
 * changed channels become a patch against its parent (a list that grew
 * stores only its new elements), two writers on one thread get a
 * {@link CairnConflictError} instead of a silent fork, and the thread is a
 * Cairn thread (history, forks, retention, the UI).
 */
export class CairnSaver extends BaseCheckpointSaver {
  private readonly url: string;
  private readonly apiKey?: string;
  private readonly pageSize: number;
  private readonly fetchFn: typeof fetch;
  private readonly heads = new Map<string, Head>();
  // Checkpoints read by id (time travel): a put after one of them may
  // start a branch; any other put must extend the head.
  private readonly explicit = new Set<string>();
  // Puts in flight, by thread, namespace and checkpoint id: LangGraph may
  // put a checkpoint's writes, or its child, before the put returned.
  private readonly inflight = new Map<string, Promise<unknown>>();
  // Checkpoints this saver put (the newest LANDED_MAX), and writes waiting
  // for a put: with durability "async" LangGraph puts a step's writes
  // before the checkpoint they belong to.
  private readonly landed = new Set<string>();
  private readonly waiters = new Map<string, Array<() => void>>();

  constructor(options: CairnSaverOptions) {
    super(options.serde);
    if (!options?.url) throw new Error("CairnSaver: options.url (the address of cairn serve) is required");
    this.url = options.url.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.pageSize = Math.min(100, Math.max(1, options.pageSize ?? 50));
    this.fetchFn = options.fetch ?? fetch;
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.apiKey) headers["x-api-key"] = this.apiKey;
    const res = await this.fetchFn(this.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let data: any = undefined;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = { detail: text };
    }
    if (!res.ok) {
      const detail = `${method} ${path}: ${res.status} ${data?.detail ?? res.statusText}`;
      if (res.status === 409) throw new CairnConflictError(detail);
      throw new CairnError(res.status, detail, data?.path);
    }
    return data as T;
  }

  // ---- values ----

  /** The stored JSON text of one value. */
  private async encode(value: unknown): Promise<string> {
    const [type, data] = await this.serde.dumpsTyped(value);
    if (type === "json") {
      const text = typeof data === "string" ? data : new TextDecoder().decode(data);
      if (!text.includes(TYPED)) return text;
      return `{"${TYPED}":"json","value":${text}}`;
    }
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return JSON.stringify({ [TYPED]: type, b64: Buffer.from(bytes).toString("base64") });
  }

  private async decode(stored: unknown): Promise<unknown> {
    if (stored !== null && typeof stored === "object" && !Array.isArray(stored) && TYPED in stored) {
      const t = stored as Record<string, any>;
      if (t[TYPED] === "json") return this.serde.loadsTyped("json", JSON.stringify(t.value));
      return this.serde.loadsTyped(t[TYPED], new Uint8Array(Buffer.from(String(t.b64), "base64")));
    }
    return this.serde.loadsTyped("json", JSON.stringify(stored));
  }

  /** A channel's value: a list element by element, so appends can be sent alone. */
  private async decodeChannel(stored: unknown): Promise<unknown> {
    if (!Array.isArray(stored)) return this.decode(stored);
    if (!stored.some((e) => e !== null && typeof e === "object" && !Array.isArray(e) && TYPED in e)) {
      // Plain JSON elements: one call, as a saver that stored the list whole.
      return this.serde.loadsTyped("json", JSON.stringify(stored));
    }
    return Promise.all(stored.map((e) => this.decode(e)));
  }

  // ---- reads ----

  private key(thread: string, ns: string): string {
    return `${thread}\u0000${ns}`;
  }

  private remember(thread: string, ns: string, head: Head): void {
    const k = this.key(thread, ns);
    this.heads.delete(k);
    this.heads.set(k, head);
    if (this.heads.size > HEADS_MAX) this.heads.delete(this.heads.keys().next().value as string);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    return this.readTuple(config, true);
  }

  // readTuple reads a checkpoint; explicit: a caller's read by id, after
  // which a put may branch from it (internal reads never allow that).
  private async readTuple(config: RunnableConfig, explicit: boolean): Promise<CheckpointTuple | undefined> {
    const thread_id = config.configurable?.thread_id;
    if (thread_id === undefined || thread_id === null) return undefined;
    const checkpoint_ns: string = config.configurable?.checkpoint_ns ?? "";
    const checkpoint_id = getCheckpointId(config) || undefined;
    let wire: WireTuple;
    try {
      wire = await this.call<WireTuple>("POST", "/checkpointer/get", { thread_id: String(thread_id), checkpoint_ns, checkpoint_id });
    } catch (e) {
      if (e instanceof CairnError && e.status === 404) return undefined;
      throw e;
    }
    if (checkpoint_id && explicit) {
      if (this.explicit.size >= 10000) this.explicit.clear();
      this.explicit.add(`${this.key(wire.thread_id, checkpoint_ns)}\u0000${checkpoint_id}`);
    }
    const tuple = await this.tupleOf(wire);
    const lists = new Map<string, List>();
    for (const [ch, v] of Object.entries(wire.channels)) {
      const objs = tuple.checkpoint.channel_values[ch];
      if (Array.isArray(v) && Array.isArray(objs) && objs.length === v.length) {
        lists.set(ch, { objs: objs.slice(), texts: v.map((e) => JSON.stringify(e)) });
      }
    }
    if (explicit) this.remember(wire.thread_id, checkpoint_ns, { id: wire.checkpoint.id, lists });
    return tuple;
  }

  private async tupleOf(wire: WireTuple, batch: Record<string, unknown[]>[] = []): Promise<CheckpointTuple> {
    const values: Record<string, unknown> = {};
    await Promise.all(
      Object.entries(wire.channels).map(async ([ch, v]) => {
        values[ch] = await this.decodeChannel(v);
      }),
    );
    for (const [ch, s] of Object.entries(wire.shared ?? {})) {
      const from = batch[s.of]?.[ch];
      if (!from || from.length < s.len) throw new Error(`CairnSaver: a batch shares ${ch} with tuple ${s.of}, which lacks it`);
      values[ch] = from.slice(0, s.len);
    }
    const checkpoint: Checkpoint = {
      v: wire.checkpoint.v,
      id: wire.checkpoint.id,
      ts: wire.checkpoint.ts,
      channel_values: values,
      channel_versions: wire.checkpoint.channel_versions ?? {},
      versions_seen: wire.checkpoint.versions_seen ?? {},
    };
    const config = { configurable: { thread_id: wire.thread_id, checkpoint_ns: wire.checkpoint_ns, checkpoint_id: wire.checkpoint.id } };
    const tuple: CheckpointTuple = {
      config,
      checkpoint,
      metadata: (await this.serde.loadsTyped("json", JSON.stringify(wire.metadata ?? {}))) as CheckpointMetadata,
      pendingWrites: await this.writesOf(wire.pending_writes),
    };
    if (wire.parent_id) {
      tuple.parentConfig = { configurable: { thread_id: wire.thread_id, checkpoint_ns: wire.checkpoint_ns, checkpoint_id: wire.parent_id } };
      if (checkpoint.v < 4) await this.migratePendingSends(checkpoint, wire);
    }
    return tuple;
  }

  /** Pending writes in the order LangGraph applies them (writesSortKey). */
  private async writesOf(ws: WireWrite[]): Promise<CheckpointPendingWrite[]> {
    const sorted = [...ws].sort((a, b) =>
      compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id, a.idx), writesSortKey(b.task_path ?? "", b.task_id, b.idx)),
    );
    return Promise.all(sorted.map(async (w) => [w.task_id, w.channel, await this.decode(w.value)] as CheckpointPendingWrite));
  }

  // Checkpoints before format 4 kept the sends of a step in their parent's
  // pending writes; LangGraph's savers move them into the TASKS channel.
  private async migratePendingSends(checkpoint: Checkpoint, wire: WireTuple): Promise<void> {
    const parent = await this.call<WireTuple>("POST", "/checkpointer/get", {
      thread_id: wire.thread_id,
      checkpoint_ns: wire.checkpoint_ns,
      checkpoint_id: wire.parent_id,
    });
    const sends = (await this.writesOf(parent.pending_writes)).filter(([, ch]) => ch === TASKS).map(([, , v]) => v);
    checkpoint.channel_values[TASKS] = sends;
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { limit, before, filter } = options ?? {};
    const thread_id = config.configurable?.thread_id;
    const { refs } = await this.call<{ refs: WireRef[] }>("POST", "/checkpointer/list", {
      thread_id: thread_id === undefined ? undefined : String(thread_id),
      checkpoint_ns: config.configurable?.checkpoint_ns,
      checkpoint_id: getCheckpointId(config) || undefined,
      before: before?.configurable?.checkpoint_id,
      limit,
      filter,
    });
    for (let i = 0; i < refs.length; i += this.pageSize) {
      const { tuples } = await this.call<{ tuples: WireTuple[] }>("POST", "/checkpointer/batch", { refs: refs.slice(i, i + this.pageSize) });
      // Lists a batch sends once are shared by the tuples (their elements,
      // not the arrays); the saver keeps its own copy of each array.
      const lists: Record<string, unknown[]>[] = [];
      for (const t of tuples) {
        const tuple = await this.tupleOf(t, lists);
        const own: Record<string, unknown[]> = {};
        for (const [ch, v] of Object.entries(tuple.checkpoint.channel_values)) if (Array.isArray(v)) own[ch] = v.slice();
        lists.push(own);
        yield tuple;
      }
    }
  }

  /**
   * The history DeltaChannel rebuilds its value from: LangGraph's own walk
   * up the parent chain, reading the ancestors a page at a time (one list
   * of up to 100 checkpoints) instead of one request each.
   */
  async getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) return {};
    const collected: Record<string, CheckpointPendingWrite[]> = {};
    const seeds: Record<string, unknown> = {};
    const remaining = new Set(channels);
    for (const ch of channels) collected[ch] = [];
    const page = new Map<string, CheckpointTuple>();
    let cursor = (await this.readTuple(config, false))?.parentConfig;
    while (cursor != null && remaining.size > 0) {
      const id = cursor.configurable?.checkpoint_id as string;
      let tup = page.get(id);
      if (!tup) {
        page.clear();
        tup = await this.readTuple(cursor, false);
        if (tup === undefined) break;
        const ancestors = { configurable: { thread_id: cursor.configurable?.thread_id, checkpoint_ns: cursor.configurable?.checkpoint_ns ?? "" } };
        for await (const t of this.list(ancestors, { before: cursor, limit: 99 })) page.set(t.checkpoint.id, t);
      }
      const perChannel: Record<string, CheckpointPendingWrite[]> = {};
      for (const w of tup.pendingWrites ?? []) if (remaining.has(w[1])) (perChannel[w[1]] ??= []).push(w);
      for (const [ch, block] of Object.entries(perChannel)) for (let i = block.length - 1; i >= 0; i -= 1) collected[ch].push(block[i]);
      for (const ch of [...remaining]) {
        if (Object.prototype.hasOwnProperty.call(tup.checkpoint.channel_values, ch)) {
          seeds[ch] = tup.checkpoint.channel_values[ch];
          remaining.delete(ch);
        }
      }
      cursor = tup.parentConfig;
    }
    const result: Record<string, DeltaChannelHistory> = {};
    for (const ch of channels) {
      const entry: DeltaChannelHistory = { writes: collected[ch].slice().reverse() };
      if (Object.prototype.hasOwnProperty.call(seeds, ch)) entry.seed = seeds[ch];
      result[ch] = entry;
    }
    return result;
  }

  // ---- writes ----

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const thread_id = config.configurable?.thread_id;
    if (thread_id === undefined || thread_id === null) {
      throw new Error('CairnSaver.put: the config has no "thread_id" in its "configurable"');
    }
    // Registered before the first await: a putWrites or put that follows
    // at once waits for this one.
    const k = `${this.key(String(thread_id), config.configurable?.checkpoint_ns ?? "")}\u0000${checkpoint.id}`;
    const done = this.store(config, checkpoint, metadata, newVersions);
    this.inflight.set(k, done);
    try {
      await done;
      this.landed.add(k);
      if (this.landed.size > LANDED_MAX) this.landed.delete(this.landed.values().next().value as string);
    } finally {
      if (this.inflight.get(k) === done) this.inflight.delete(k);
      for (const wake of this.waiters.get(k) ?? []) wake();
      this.waiters.delete(k);
    }
    return { configurable: { thread_id, checkpoint_ns: config.configurable?.checkpoint_ns ?? "", checkpoint_id: checkpoint.id } };
  }

  private async store(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<void> {
    const thread = String(config.configurable?.thread_id);
    const checkpoint_ns: string = config.configurable?.checkpoint_ns ?? "";
    const parent_id: string | undefined = config.configurable?.checkpoint_id || undefined;
    const prev = this.heads.get(this.key(thread, checkpoint_ns));
    const parentLists = prev && parent_id && prev.id === parent_id ? prev.lists : new Map<string, List>();
    const lists = new Map(parentLists);
    const channels: Record<string, unknown> = {};
    for (const ch of Object.keys(newVersions)) {
      const value = (checkpoint.channel_values as Record<string, unknown>)[ch];
      if (!(ch in checkpoint.channel_values) || value === undefined) {
        channels[ch] = { delete: true };
        lists.delete(ch);
        continue;
      }
      if (!Array.isArray(value)) {
        channels[ch] = { value: JSON.parse(await this.encode(value)) };
        lists.delete(ch);
        continue;
      }
      const old = parentLists.get(ch);
      // An element that is the parent's own (the same object at the same
      // place: reducers replace what they change) keeps its serialization.
      const same = old ? sharedPrefix(old.objs, value) : 0;
      const texts = old ? old.texts.slice(0, same) : [];
      for (const e of await Promise.all(value.slice(same).map((e) => this.encode(e)))) texts.push(e);
      lists.set(ch, { objs: value.slice(), texts });
      if (old && old.texts.length <= texts.length && old.texts.every((e, i) => i < same || e === texts[i])) {
        channels[ch] = { append: texts.slice(old.texts.length).map((e) => JSON.parse(e)), base: old.texts.length };
      } else {
        channels[ch] = { value: JSON.parse(`[${texts.join(",")}]`) };
      }
    }
    const [mdType, mdData] = await this.serde.dumpsTyped(metadata);
    if (mdType !== "json") throw new Error(`CairnSaver.put: metadata serialized as ${mdType}, not JSON`);
    const header: Header = {
      v: checkpoint.v,
      id: checkpoint.id,
      ts: checkpoint.ts,
      channel_versions: checkpoint.channel_versions,
      versions_seen: checkpoint.versions_seen,
    };
    const fork = parent_id !== undefined && this.explicit.has(`${this.key(thread, checkpoint_ns)}\u0000${parent_id}`);
    if (parent_id) await this.settled(thread, checkpoint_ns, parent_id);
    await this.call("POST", "/checkpointer/put", {
      thread_id: thread,
      checkpoint_ns,
      parent_id,
      fork,
      checkpoint: header,
      metadata: JSON.parse(typeof mdData === "string" ? mdData : new TextDecoder().decode(mdData)),
      channels,
    });
    this.remember(thread, checkpoint_ns, { id: checkpoint.id, lists });
  }

  /** Waits for a put of this saver of the checkpoint, if one is in flight. */
  private async settled(thread: string, ns: string, id: string): Promise<void> {
    const p = this.inflight.get(`${this.key(thread, ns)}\u0000${id}`);
    if (p) await p.catch(() => undefined);
  }

  /** Waits until this saver put checkpoint k, at most WAIT_MS. */
  private landing(k: string): Promise<void> {
    if (this.landed.has(k)) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, WAIT_MS);
      timer.unref?.();
      const list = this.waiters.get(k) ?? [];
      list.push(() => {
        clearTimeout(timer);
        resolve();
      });
      this.waiters.set(k, list);
    });
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const thread_id = config.configurable?.thread_id;
    const checkpoint_id = config.configurable?.checkpoint_id;
    if (thread_id === undefined || thread_id === null) throw new Error('CairnSaver.putWrites: the config has no "thread_id"');
    if (!checkpoint_id) throw new Error('CairnSaver.putWrites: the config has no "checkpoint_id"');
    const encoded = await Promise.all(
      writes.map(async ([channel, value], idx) => ({
        channel,
        idx: WRITES_IDX_MAP[channel] ?? idx,
        value: JSON.parse(await this.encode(value)),
      })),
    );
    const thread = String(thread_id);
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const k = `${this.key(thread, ns)}\u0000${checkpoint_id}`;
    const inflight = this.inflight.get(k);
    if (inflight) await inflight.catch(() => undefined);
    else if (!this.landed.has(k) && [...this.inflight.keys()].some((p) => p.startsWith(`${this.key(thread, ns)}\u0000`))) await this.landing(k);
    const body = { thread_id: thread, checkpoint_ns: ns, checkpoint_id, task_id: taskId, task_path: taskPath ?? "", writes: encoded };
    try {
      await this.call("POST", "/checkpointer/writes", body);
    } catch (e) {
      // The checkpoint's put may not have been made yet.
      if (!(e instanceof CairnError && e.status === 404) || this.landed.has(k)) throw e;
      await this.landing(k);
      await this.call("POST", "/checkpointer/writes", body);
    }
  }

  // ---- threads ----

  private forget(thread: string): void {
    for (const k of [...this.heads.keys()]) if (k.startsWith(`${thread}\u0000`)) this.heads.delete(k);
    for (const k of [...this.explicit]) if (k.startsWith(`${thread}\u0000`)) this.explicit.delete(k);
  }

  /** Deletes a thread: all its checkpoints and pending writes. */
  async deleteThread(threadId: string): Promise<void> {
    this.forget(threadId);
    try {
      await this.call("DELETE", `/checkpointer/threads/${encodeURIComponent(threadId)}`);
    } catch (e) {
      if (!(e instanceof CairnError && e.status === 404)) throw e; // nothing to delete
    }
  }

  /**
   * Copies a thread, every namespace, checkpoint (same checkpoint ids) and
   * pending write, to a new thread; a CairnConflictError if it exists.
   */
  async copyThread(sourceThreadId: string, targetThreadId: string): Promise<void> {
    await this.call("POST", `/checkpointer/threads/${encodeURIComponent(sourceThreadId)}/copy`, { target_thread_id: targetThreadId });
  }

  /**
   * Deletes old checkpoints of threads. keep_latest keeps the newest
   * keepLast (default 1) of each branch of each namespace, with the
   * checkpoints they are rebuilt from and their pending writes, so the head
   * still loads and resumes; delete deletes the threads.
   */
  async prune(threadIds: string[], options: PruneOptions = {}): Promise<PruneResult> {
    for (const t of threadIds) this.forget(t);
    return this.call<PruneResult>("POST", "/checkpointer/prune", {
      thread_ids: threadIds,
      strategy: options.strategy ?? "keep_latest",
      keep_last: options.keepLast ?? 1,
    });
  }
}
