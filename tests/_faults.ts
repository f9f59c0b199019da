/**
 * Shared pieces of the fault suite (tests/faults_*_test.ts): a recorder of handler runs and the
 * figures each fault test reports. With `KOPF_FAULTS_RESULTS=<file>` set, every test appends its
 * figures there as one JSON line; `tools/faults_report.ts` turns them into the table of
 * docs/reliability.md.
 */

/** One fault's figures. */
export interface FaultFigures {
  /** The fault, as the table names it. */
  readonly fault: string;
  /** From the end of the fault until everything was handled, in seconds. */
  readonly recoverySeconds: number;
  /** Changes whose last state was never handled. */
  readonly lostChanges: number;
  /** Handler runs that repeated a completed one. */
  readonly repeatedRuns: number;
  /** Extra notes (requests counted, retries honoured…). */
  readonly notes?: string;
}

/** Appends a fault's figures to `$KOPF_FAULTS_RESULTS`, if set. */
export async function recordFault(figures: FaultFigures): Promise<void> {
  const path = Deno.env.get("KOPF_FAULTS_RESULTS");
  if (!path) return;
  await Deno.writeTextFile(path, JSON.stringify(figures) + "\n", { append: true });
}

/** Handler runs by `handler object value`, to find repeats and what was handled last. */
export class RunLog {
  readonly runs: Array<{ handler: string; name: string; value: unknown; at: number }> = [];

  /** Records a run. */
  add(handler: string, name: string, value: unknown): void {
    this.runs.push({ handler, name, value, at: Date.now() });
  }

  /** Runs of one handler for one object. */
  of(handler: string, name: string): Array<{ value: unknown; at: number }> {
    return this.runs.filter((r) => r.handler === handler && r.name === name);
  }

  /** How many runs repeat an earlier run of the same handler, object and value. */
  repeats(handlers: readonly string[] = ["create", "update"]): number {
    const seen = new Set<string>();
    let repeats = 0;
    for (const r of this.runs) {
      if (!handlers.includes(r.handler)) continue;
      const key = `${r.handler} ${r.name} ${JSON.stringify(r.value)}`;
      if (seen.has(key)) repeats++;
      seen.add(key);
    }
    return repeats;
  }
}
