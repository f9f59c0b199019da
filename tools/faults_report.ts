/**
 * Runs the fault suite (tests/faults_*_test.ts) with `KOPF_FAULTS_RESULTS` set and writes its
 * figures as the table of docs/reliability.md (between the `faults-table` markers).
 *
 *   tools/deno.sh run -A tools/faults_report.ts
 *   KOPF_FAULTS_RESULTS=/tmp/f.jsonl bash tools/test.sh && \
 *     tools/deno.sh run -A tools/faults_report.ts --from /tmp/f.jsonl   # from a full run
 *
 * The suite is the same that `tools/test.sh` runs in CI; this only collects its figures.
 * @module
 */
import type { FaultFigures } from "../tests/_faults.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DOC = `${ROOT}/docs/reliability.md`;
const BEGIN = "<!-- faults-table: begin (tools/faults_report.ts) -->";
const END = "<!-- faults-table: end -->";

const from = Deno.args[0] === "--from" ? Deno.args[1] : undefined;
const results = from ?? await Deno.makeTempFile({ prefix: "kopf-faults-", suffix: ".jsonl" });
try {
  const run = from ? { success: true } : await new Deno.Command("bash", {
    args: ["tools/test.sh", "tests/faults_emulator_test.ts", "tests/faults_plane_test.ts"],
    cwd: ROOT,
    env: { KOPF_FAULTS_RESULTS: results },
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  const figures = (await Deno.readTextFile(results)).split("\n").filter(Boolean)
    .map((line) => JSON.parse(line) as FaultFigures);
  if (!run.success) {
    console.error("the fault suite failed: the table is not updated");
    Deno.exit(1);
  }
  const commit = new TextDecoder().decode(
    (await new Deno.Command("git", { args: ["rev-parse", "--short", "HEAD"], cwd: ROOT }).output())
      .stdout,
  ).trim();
  const table = [
    BEGIN,
    "",
    `Run of ${new Date().toISOString().slice(0, 16)}Z at commit ${commit} on this repository's ` +
    "test machine (2 cores).",
    "",
    "| fault | recovery, s | lost changes | repeated handler runs | notes |",
    "| --- | ---: | ---: | ---: | --- |",
    ...figures.map((f) =>
      `| ${f.fault} | ${f.recoverySeconds.toFixed(1)} | ${f.lostChanges} | ${f.repeatedRuns} | ${
        f.notes ?? ""
      } |`
    ),
    "",
    END,
  ].join("\n");
  const doc = await Deno.readTextFile(DOC);
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (start < 0 || end < 0) throw new Error(`${DOC} has no faults-table markers`);
  await Deno.writeTextFile(DOC, doc.slice(0, start) + table + doc.slice(end + END.length));
  console.log(`${figures.length} faults written to docs/reliability.md`);
} finally {
  if (!from) await Deno.remove(results).catch(() => {});
}
