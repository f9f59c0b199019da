/**
 * The control plane's component processes as a group: spawning one with its output in a log
 * file, retrying a start whose port was taken meanwhile, the tails of the logs, and stopping
 * them in dependency order. Used by `../control_plane.ts`.
 * @module
 */

import {
  type Component,
  type ComponentName,
  COMPONENTS,
  freePorts,
  readText,
  terminate,
} from "./processes.ts";

/**
 * Spawns a component with its stdout and stderr appended to `<dir>/<name>.log`, adds it to
 * `components` and records its pid in `<runDir>/children.pids` (for the watchdog and the
 * reaper). The child never keeps the Deno process alive.
 *
 * @param components The plane's components; the new one is appended.
 * @param dir The plane's directory.
 * @param runDir The run's registry directory.
 * @param name Which component.
 * @param binary The executable.
 * @param args Its flags.
 * @returns The running component.
 */
export async function spawnComponent(
  components: Component[],
  dir: string,
  runDir: string,
  name: ComponentName,
  binary: string,
  args: string[],
): Promise<Component> {
  const logPath = `${dir}/${name}.log`;
  // The shell only redirects the output to the log file and then becomes the binary (exec),
  // so the pid is the component's own and nothing in this process pumps its output.
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "sh", logPath, binary, ...args],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref(); // never keeps the Deno process alive; `unload` kills it
  const component: Component = {
    name,
    child,
    logPath,
    status: undefined,
    exited: child.status.then((status) => (component.status = status)),
  };
  components.push(component);
  await Deno.writeTextFile(`${runDir}/children.pids`, `${child.pid}\n`, { append: true });
  return component;
}

/**
 * Runs `attempt` with `count` free ports; if the component died because a port was taken
 * meanwhile ("address already in use"), drops it from `components` and retries with new ports
 * (3 attempts, within `deadline`).
 *
 * @param components The plane's components.
 * @param name The component that `attempt` starts.
 * @param count How many ports it needs.
 * @param deadline When to stop retrying (epoch ms).
 * @param attempt Starts the component on the given ports and waits until it is ready.
 */
export async function startWithFreePorts(
  components: Component[],
  name: ComponentName,
  count: number,
  deadline: number,
  attempt: (ports: number[]) => Promise<void>,
): Promise<void> {
  for (let round = 1;; round++) {
    const ports = freePorts(count);
    try {
      await attempt(ports);
      return;
    } catch (error) {
      const component = components.find((c) => c.name === name);
      const log = component ? readText(component.logPath) : "";
      if (round >= 3 || !component?.status || !/address already in use/i.test(log)) throw error;
      if (Date.now() >= deadline) throw error;
      components.splice(components.indexOf(component), 1);
      await Deno.writeTextFile(component.logPath, `[retrying with new ports]\n`, {
        append: true,
      });
    }
  }
}

/**
 * Stops all components (SIGTERM, then SIGKILL after `graceMs`): the clients of etcd first, so
 * that they don't spin on a vanished etcd while shutting down.
 *
 * @param components The plane's components.
 * @param graceMs How long each gets to exit after SIGTERM.
 */
export async function stopComponents(components: Component[], graceMs: number): Promise<void> {
  const byName = (name: ComponentName) => components.filter((c) => c.name === name);
  await Promise.all(byName("kube-controller-manager").map((c) => terminate(c, graceMs)));
  await Promise.all(byName("kube-apiserver").map((c) => terminate(c, graceMs)));
  await Promise.all(byName("etcd").map((c) => terminate(c, graceMs)));
}

/**
 * The last `lines` lines of each component's log under `dir`; components without a log are
 * left out.
 *
 * @param dir The plane's directory.
 * @param lines How many lines of each log.
 * @returns The tails, one section per component.
 */
export function componentLogs(dir: string, lines: number): string {
  return COMPONENTS.map((name) => {
    let text: string;
    try {
      text = Deno.readTextFileSync(`${dir}/${name}.log`);
    } catch {
      return "";
    }
    const tail = text.trimEnd().split("\n").slice(-lines).join("\n");
    return `----- ${name} (last ${lines} lines) -----\n${tail}\n`;
  }).join("");
}
