/**
 * The soak's ledger (bench/soak.ts): every change the harness makes, every handler run the
 * operator appends to its run log, and their matching (each change handled exactly once).
 * @module
 */

/** One change the harness made to an object. */
export interface Change {
  readonly kind: "create" | "update" | "delete";
  readonly name: string;
  readonly value: number;
  readonly slot: number;
  readonly at: number;
}

/** One slot of the churn: an object (or none), and its unhandled change if any. */
export interface Slot {
  name: string | undefined;
  incarnation: number;
  value: number;
  pending: string | undefined;
}

/** The ledger: changes made, handler runs seen, their matching. */
export class Ledger {
  readonly expected = new Map<string, Change>();
  readonly runs = new Map<string, number>();
  readonly latencies: number[] = [];
  readonly slots: Slot[];
  counts = { create: 0, update: 0, delete: 0 };
  totalRuns = 0;
  duplicated = 0;
  unexpected = 0;
  #offset = 0;
  #rest = "";
  #polling: Promise<void> = Promise.resolve();
  readonly #path: string;
  readonly #log: (message: string) => void;

  /**
   * @param path The run log the operator appends to (`kind name value ms` a line).
   * @param objects The number of slots.
   * @param log Where unexpected and duplicated runs are reported.
   */
  constructor(path: string, objects: number, log: (message: string) => void) {
    this.#path = path;
    this.#log = log;
    this.slots = Array.from({ length: objects }, () => ({
      name: undefined,
      incarnation: 0,
      value: 0,
      pending: undefined,
    }));
  }

  get pending(): number {
    return this.slots.filter((s) => s.pending).length;
  }

  get changes(): number {
    return this.counts.create + this.counts.update + this.counts.delete;
  }

  expect(change: Change): void {
    const key = `${change.kind} ${change.name} ${change.value}`;
    this.expected.set(key, change);
    this.slots[change.slot]!.pending = key;
    this.counts[change.kind]++;
  }

  /** Reads the runs appended to the run log since the last call (one reader at a time). */
  poll(): Promise<void> {
    this.#polling = this.#polling.then(() => this.#read());
    return this.#polling;
  }

  async #read(): Promise<void> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.#path, { read: true });
    } catch {
      return;
    }
    try {
      await file.seek(this.#offset, Deno.SeekMode.Start);
      const buffer = new Uint8Array(1 << 16);
      for (;;) {
        const n = await file.read(buffer);
        if (n === null || n === 0) break;
        this.#offset += n;
        this.#rest += new TextDecoder().decode(buffer.subarray(0, n));
        const lines = this.#rest.split("\n");
        this.#rest = lines.pop() ?? "";
        for (const line of lines) if (line) this.#run(line);
      }
    } finally {
      file.close();
    }
  }

  #run(line: string): void {
    const [kind, name, value, ms] = line.split(" ");
    const key = `${kind} ${name} ${value}`;
    this.totalRuns++;
    const count = (this.runs.get(key) ?? 0) + 1;
    this.runs.set(key, count);
    const change = this.expected.get(key);
    if (!change) {
      this.unexpected++;
      this.#log(`unexpected run: ${line}`);
      return;
    }
    if (count > 1) {
      this.duplicated++;
      this.#log(`duplicated run: ${line}`);
      return;
    }
    this.latencies.push(Number(ms) - change.at);
    const slot = this.slots[change.slot]!;
    if (slot.pending === key) slot.pending = undefined;
  }

  get lost(): number {
    let lost = 0;
    for (const key of this.expected.keys()) if (!this.runs.has(key)) lost++;
    return lost;
  }
}
