/**
 * Preparing the control plane for the benchmark: the CRDs of both variants, served and warmed
 * up; and the machine's description for the report.
 * @module
 */
import { parse } from "yaml";
import { createTestNamespace, type SharedControlPlane } from "../../testing/control_plane.ts";
import type { CrdVariant } from "./config.ts";
import { ROOT, sleep } from "./contenders.ts";
import type { Api } from "./kube.ts";

/** Installs a variant's CRD (idempotent). */
export async function applyCrd(api: Api, variant: CrdVariant): Promise<void> {
  const crd = parse(await Deno.readTextFile(`${ROOT}/${variant.manifest}`));
  const { status, body } = await api.request(
    "POST",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    crd,
  );
  if (status !== 201 && status !== 409) {
    throw new Error(`cannot create the CRD: HTTP ${status}: ${JSON.stringify(body)}`);
  }
}

/** Waits until the API server serves the variant's resource. */
export async function waitForCrd(api: Api): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { status } = await api.request("GET", api.path("default"));
    if (status === 200) return;
    await sleep(200);
  }
  throw new Error(`the ${api.resource.plural} CRD was not served within 60 s`);
}

/**
 * The API server's first write of a new custom resource takes seconds (it sets up the CRD's
 * storage): do it before any contender is timed, with throw-away objects.
 */
export async function warmUp(api: Api, plane: SharedControlPlane): Promise<void> {
  const ns = await createTestNamespace(plane, "bench-warmup");
  for (let i = 0; i < 3; i++) {
    await api.create(ns, `warmup-${i}`);
    await api.delete(ns, `warmup-${i}`);
  }
}

/** CPUs, memory and kernel of this machine. */
export async function machineInfo(): Promise<Record<string, string | number>> {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  const meminfo = await Deno.readTextFile("/proc/meminfo").catch(() => "");
  const memKb = Number(meminfo.match(/^MemTotal:\s+(\d+)/m)?.[1] ?? NaN);
  return {
    nproc: navigator.hardwareConcurrency,
    cpuModel: cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1]?.trim() ?? "unknown",
    memoryGiB: Math.round((memKb / 1024 / 1024) * 10) / 10,
    kernel: Deno.osRelease(),
  };
}
