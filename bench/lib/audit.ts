/**
 * The API server's audit log as the benchmark's request counter: the same count applies to
 * every contender, whatever its own counters say.
 *
 * The policy logs every request at `Metadata` level without the `RequestReceived` stage, so a
 * normal request is one `ResponseComplete` line and a watch is a `ResponseStarted` line plus a
 * `ResponseComplete` line when it ends (counted once, by `auditID`). Requests are attributed to
 * a contender by their `User-Agent` (each contender runs alone, in its own namespace).
 * @module
 */

/** The audit policy written next to the log. */
export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

/** One request, as far as the benchmark cares. */
export interface AuditRecord {
  /** When the API server received the request (ms since the epoch). */
  readonly t: number;
  readonly userAgent: string;
  readonly verb: string;
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string;
  readonly name: string;
  readonly code: number;
}

/** Request counts of one contender in one time window. */
export interface RequestSummary {
  /** All requests by verb (`get`, `list`, `watch`, `create`, `patch`, …), Events excluded. */
  readonly byVerb: Record<string, number>;
  /** Requests by `verb resource[/subresource]`, Events included. */
  readonly byVerbResource: Record<string, number>;
  /** Writes (create, update, patch, delete, deletecollection) to anything but Events. */
  readonly writes: number;
  /** Writes to Events (posted or patched). */
  readonly events: number;
  /** Answers with HTTP 409 Conflict. */
  readonly conflicts: number;
  /** Answers with HTTP ≥ 400 other than 409. */
  readonly errors: number;
  /** All requests. */
  readonly total: number;
}

const WRITE_VERBS = new Set(["create", "update", "patch", "delete", "deletecollection"]);

/** Parses an RFC 3339 timestamp with microseconds into ms since the epoch. */
function parseTime(text: string): number {
  const match = text.match(/^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/);
  if (!match) return Date.parse(text);
  const fraction = Number(`0.${match[2] ?? "0"}`);
  return Date.parse(`${match[1]}${match[3]}`) + fraction * 1000;
}

/** Reads the audit log incrementally. */
export class AuditLog {
  readonly path: string;
  readonly records: AuditRecord[] = [];
  #offset = 0;
  #rest = "";
  #watchIds = new Set<string>();
  #decoder = new TextDecoder();

  constructor(path: string) {
    this.path = path;
  }

  /** Reads what was appended since the last call. */
  async poll(): Promise<void> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.path, { read: true });
    } catch {
      return; // not written yet
    }
    try {
      await file.seek(this.#offset, Deno.SeekMode.Start);
      const buffer = new Uint8Array(1 << 20);
      for (;;) {
        const n = await file.read(buffer);
        if (n === null || n === 0) break;
        this.#offset += n;
        this.#rest += this.#decoder.decode(buffer.subarray(0, n), { stream: true });
        const lines = this.#rest.split("\n");
        this.#rest = lines.pop() ?? "";
        for (const line of lines) this.#parse(line);
      }
    } finally {
      file.close();
    }
  }

  #parse(line: string): void {
    if (!line) return;
    // deno-lint-ignore no-explicit-any
    let event: any;
    try {
      event = JSON.parse(line);
    } catch {
      return;
    }
    const verb = String(event.verb ?? "");
    if (verb === "watch") {
      const id = String(event.auditID ?? "");
      if (this.#watchIds.has(id)) return;
      this.#watchIds.add(id);
    } else if (event.stage !== "ResponseComplete") {
      return;
    }
    const ref = event.objectRef ?? {};
    this.records.push({
      t: parseTime(String(event.requestReceivedTimestamp ?? event.stageTimestamp)),
      userAgent: String(event.userAgent ?? ""),
      verb,
      resource: String(ref.resource ?? ""),
      subresource: String(ref.subresource ?? ""),
      namespace: String(ref.namespace ?? ""),
      name: String(ref.name ?? ""),
      code: Number(event.responseStatus?.code ?? 0),
    });
  }

  /** Records of a user agent (prefix) received within `[from, to)`. */
  select(
    userAgentPrefix: string,
    from: number,
    to: number,
    filter?: (record: AuditRecord) => boolean,
  ): AuditRecord[] {
    return this.records.filter((r) =>
      r.userAgent.startsWith(userAgentPrefix) && r.t >= from && r.t < to && (!filter || filter(r))
    );
  }

  /** When the user agent's last request other than a watch was received (or -Infinity). */
  lastActivity(userAgentPrefix: string): number {
    for (let i = this.records.length - 1; i >= 0; i--) {
      const r = this.records[i]!;
      if (r.userAgent.startsWith(userAgentPrefix) && r.verb !== "watch") return r.t;
    }
    return -Infinity;
  }
}

/** Counts requests by verb, writes, Event posts, conflicts and errors. */
export function summarize(records: readonly AuditRecord[]): RequestSummary {
  const byVerb: Record<string, number> = {};
  const byVerbResource: Record<string, number> = {};
  let writes = 0, events = 0, conflicts = 0, errors = 0;
  for (const r of records) {
    const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource || "-";
    const key = `${r.verb} ${resource}`;
    byVerbResource[key] = (byVerbResource[key] ?? 0) + 1;
    if (r.code === 409) conflicts++;
    else if (r.code >= 400) errors++;
    if (r.resource === "events") {
      if (WRITE_VERBS.has(r.verb)) events++;
      continue;
    }
    byVerb[r.verb] = (byVerb[r.verb] ?? 0) + 1;
    if (WRITE_VERBS.has(r.verb)) writes++;
  }
  return { byVerb, byVerbResource, writes, events, conflicts, errors, total: records.length };
}
