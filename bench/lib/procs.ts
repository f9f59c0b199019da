/**
 * Resource usage of process trees from `/proc` (Linux): CPU seconds (utime + stime of every
 * live process in the tree) and resident memory (`VmRSS`, and the peak `VmHWM`, which can be
 * reset through `/proc/<pid>/clear_refs`).
 * @module
 */

const CLK_TCK = 100; // USER_HZ: 100 on every Linux architecture the benchmark runs on

interface Stat {
  readonly ppid: number;
  readonly ticks: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state); ppid is field 4, utime 14, stime 15.
    return {
      ppid: Number(fields[1]),
      ticks: Number(fields[11]) + Number(fields[12]),
    };
  } catch {
    return undefined;
  }
}

/** The pid and all its live descendants. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    const pid = Number(entry.name);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (!stat) continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(pid);
    children.set(stat.ppid, list);
  }
  const result: number[] = [];
  const queue = [root];
  while (queue.length) {
    const pid = queue.shift()!;
    if (!readStat(pid)) continue;
    result.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return result;
}

/** CPU seconds (user + system) used so far by the live processes. */
export function cpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) ticks += readStat(pid)?.ticks ?? 0;
  return ticks / CLK_TCK;
}

/** Sum of a `/proc/<pid>/status` memory field (`VmRSS`, `VmHWM`) in MiB. */
export function memoryMiB(pids: readonly number[], field: "VmRSS" | "VmHWM"): number {
  let kb = 0;
  for (const pid of pids) {
    try {
      const text = Deno.readTextFileSync(`/proc/${pid}/status`);
      const match = text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
      if (match) kb += Number(match[1]);
    } catch {
      // gone
    }
  }
  return kb / 1024;
}

/** Resets the peak RSS (`VmHWM`) to the current RSS; `false` if the kernel refused. */
export function resetPeak(pids: readonly number[]): boolean {
  let ok = true;
  for (const pid of pids) {
    try {
      Deno.writeTextFileSync(`/proc/${pid}/clear_refs`, "5");
    } catch {
      ok = false;
    }
  }
  return ok;
}

/** Pids of processes whose command line contains `needle` (e.g. the control plane's dir). */
export function findProcesses(needle: string, name: string): number[] {
  const result: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    const pid = Number(entry.name);
    if (!Number.isInteger(pid)) continue;
    try {
      const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
      if (cmdline[0]?.endsWith(`/${name}`) && cmdline.some((arg) => arg.includes(needle))) {
        result.push(pid);
      }
    } catch {
      // gone
    }
  }
  return result;
}

/** CPU seconds the whole machine spent busy (all CPUs, from `/proc/stat`). */
export function machineBusySeconds(): number {
  try {
    const line = Deno.readTextFileSync("/proc/stat").split("\n")[0] ?? "";
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) +
      (steal ?? 0)) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** The 1-minute load average. */
export function loadAverage(): number {
  try {
    return Number(Deno.readTextFileSync("/proc/loadavg").split(" ")[0]);
  } catch {
    return NaN;
  }
}
