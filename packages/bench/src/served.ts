/**
 * `pnpm --filter @rx/bench run served [--rounds N] [--warm-rounds N] [--json] [--server-profile DIR] [--server-script PATH] [--same-process] [--sse] [--steps]`:
 * only the served path of `pnpm bench` (100 goals of 10 iterations, the server in a process of its
 * own, each goal followed), beside the same goals in-process in the same run. `--server-script`
 * runs another build's `ServeChild.js` as the server (to compare builds on one machine state);
 * `--same-process`, `--sse` and `--steps` (the step overhead, 50 goals at once on each log) add
 * those parts of the full benchmark.
 */
import { Effect } from "effect"
import { memoryRun } from "./Scenario.js"
import * as Serve from "./Serve.js"
import { flagValue, round } from "./Figures.js"

const json = process.argv.includes("--json")

// The kernel's runs `pnpm bench` makes before its served part (its warm-up, then N = 100, 1,000
// and 10,000 on the memory store), so the in-process figure is as warm as there.
for (let r = 0; r < 30; r++) await Effect.runPromise(memoryRun(100))
await Effect.runPromise(memoryRun(2_000))
for (const [n, repeats] of [[100, 21], [1_000, 7], [10_000, 3]] as const) {
  for (let r = 0; r < repeats; r++) await Effect.runPromise(memoryRun(n))
}

const figures = await Effect.runPromise(Serve.measure({
  goals: 100,
  iterations: 10,
  rounds: Number(flagValue("--rounds") ?? "5"),
  sse: process.argv.includes("--sse") ? { goals: 1, iterations: 100, delayMs: 2 } : undefined,
  sameProcess: process.argv.includes("--same-process"),
  profileDir: flagValue("--server-profile"),
  serverScript: flagValue("--server-script"),
  warmRounds: Number(flagValue("--warm-rounds") ?? "10")
}))
const steps = process.argv.includes("--steps") ? await Effect.runPromise(Serve.stepOverheads()) : undefined
const out = {
  server_cpu_us_per_iteration: round(figures.serverCpuUsPerIteration),
  inprocess_us_per_iteration: round(figures.inProcessUsPerIteration),
  ratio: round(figures.serverCpuUsPerIteration / figures.inProcessUsPerIteration, 2),
  inprocess_cpu_us_per_iteration: round(figures.inProcessCpuUsPerIteration),
  cpu_ratio: round(figures.serverCpuUsPerIteration / figures.inProcessCpuUsPerIteration, 2),
  server_us_per_iteration: round(figures.serverUsPerIteration),
  client_cpu_us_per_iteration: round(figures.clientCpuUsPerIteration),
  server_cpu_by_round: figures.serverCpuUsPerIterationByRound.map((x) => round(x, 0)),
  ...(process.argv.includes("--same-process") ? { server_same_process_us_per_iteration: round(figures.sameProcessUsPerIteration) } : {}),
  ...(process.argv.includes("--sse") ? { sse_latency_ms: { p50: round(figures.sse.p50, 2), p99: round(figures.sse.p99, 2) } } : {}),
  ...(steps === undefined ? {} : { served_step_overhead_ms: steps })
}
process.stdout.write(json ? `${JSON.stringify(out)}\n` : `${Object.entries(out).map(([k, v]) => `${k} ${v}`).join("\n")}\n`)
