/**
 * `pnpm --filter @rx/bench run served-parts [--rounds N] [--server-script PATH] [--json]`: where a
 * served goal's cost goes. The server runs in a process of its own (`ServeChild.ts`, 100 goals at
 * once, the scripted model and `echo`); after 10 warm-up rounds of the benchmark's own (100 goals
 * of 10 iterations, each followed), each measured round does one thing 100 times at once, and the
 * server's CPU time (its `process.cpuUsage`) over the round is divided by 100:
 *
 * - `followed`: submit a goal of 10 iterations and follow its events to `Terminated` (the benchmark);
 * - `submitted`: submit a goal of 10 iterations, not followed (the round then waits for the goals
 *   to end, asking for the open ones after 400 ms and then every 200 ms);
 * - `submitted_1`: the same with goals of 1 iteration: the per-goal cost, nearly without iterations;
 * - `events_done`: the events of a goal that has ended (42 events), as one response;
 * - `get_done`: `GET /v1/goals/{id}` of a goal that has ended;
 * - `healthz`: `GET /healthz`, the least a request costs;
 * - `inprocess_1`, `inprocess_10`: the same goals (1 and 10 iterations) run by `Runner.run` in 100
 *   fibers of this process, same model, tools and store: this process's CPU time per goal.
 *
 * Plain `fetch` clients, in this process. Medians over the rounds, µs of server CPU per goal (or
 * request).
 */
import { Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { model } from "./Serve.js"
import { flagValue, median } from "./Figures.js"

const rounds = Number(flagValue("--rounds") ?? "8")
const script = flagValue("--server-script") ?? join(import.meta.dirname, "ServeChild.js")
const token = "bench-token-0123456789abcdef"
const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
const goals = 100

const child = spawn(process.execPath, [script, String(goals), "10"], { stdio: ["pipe", "pipe", "inherit"] })
const pending: Array<string> = []
let waiting: ((line: string) => void) | undefined
createInterface({ input: child.stdout }).on("line", (line) => {
  const resume = waiting
  waiting = undefined
  if (resume === undefined) pending.push(line)
  else resume(line)
})
const next = () => {
  const line = pending.shift()
  return line !== undefined ? Promise.resolve(line) : new Promise<string>((resume) => (waiting = resume))
}
const { url } = JSON.parse(await next()) as { readonly url: string }
const cpu = async () => {
  child.stdin.write("\"cpu\"\n")
  return (JSON.parse(await next()) as { readonly cpu: number }).cpu
}

let named = 0
const submit = async (iterations: number) => {
  const response = await fetch(`${url}/v1/goals`, {
    method: "POST",
    headers,
    body: JSON.stringify({ goal: `parts ${named++}`, options: { maxIterations: iterations } })
  })
  return ((await response.json()) as { readonly goalId: string }).goalId
}
/** Goals whose events ended without `Terminated`: the figures are then not of whole goals, and the run fails. */
const unended: Array<string> = []
const eventsOf = async (goalId: string) => {
  const text = await (await fetch(`${url}/v1/goals/${goalId}/events`, { headers })).text()
  if (!text.includes("\"Terminated\"")) unended.push(goalId)
}
/** Until no goal is open: asked after 400 ms, then every 200 ms (each answer lists the goals, which costs the server too). */
const allEnded = async () => {
  for (let wait = 400; ; wait = 200) {
    await new Promise((resume) => setTimeout(resume, wait))
    const page = (await (await fetch(`${url}/v1/goals?status=open&limit=1`, { headers })).json()) as { readonly goals: ReadonlyArray<unknown> }
    if (page.goals.length === 0) return
  }
}
const times = <A>(f: (i: number) => Promise<A>) => Promise.all(Array.from({ length: goals }, (_, i) => f(i)))

/** This process's CPU time (µs) while 100 goals of `iterations` run in-process at once. */
const inProcess = async (iterations: number) => {
  const before = process.cpuUsage()
  await Effect.runPromise(
    Effect.forEach(
      Array.from({ length: goals }, () => `in-process ${named++}`),
      (goal) => Runner.run({ goal, options: { maxIterations: iterations } }),
      { concurrency: "unbounded", discard: true }
    ).pipe(Effect.provide(Layer.mergeAll(ToolRegistry.layer([Tool.echo]), model(10), StateStore.layerMemory)))
  )
  const used = process.cpuUsage(before)
  return used.user + used.system
}

let ended: ReadonlyArray<string> = []
const parts: Record<string, () => Promise<unknown>> = {
  followed: () => times(async () => eventsOf(await submit(10))),
  submitted: async () => {
    ended = await times(() => submit(10))
    await allEnded()
  },
  submitted_1: async () => {
    await times(() => submit(1))
    await allEnded()
  },
  events_done: () => Promise.all(ended.map(eventsOf)),
  get_done: () => Promise.all(ended.map(async (goalId) => (await fetch(`${url}/v1/goals/${goalId}`, { headers })).text())),
  healthz: () => times(async () => (await fetch(`${url}/healthz`)).text())
}

for (let r = 0; r < 10; r++) {
  await parts["followed"]?.()
  await inProcess(10)
}
const samples: Record<string, Array<number>> = {}
for (let r = 0; r < rounds; r++) {
  for (const [name, part] of Object.entries(parts)) {
    const before = await cpu()
    await part()
    ;(samples[name] ??= []).push(((await cpu()) - before) / goals)
  }
  for (const iterations of [1, 10]) (samples[`inprocess_${iterations}`] ??= []).push((await inProcess(iterations)) / goals)
}
child.stdin.end()
const figures = Object.fromEntries(Object.entries(samples).map(([name, xs]) => [name, Math.round(median(xs))]))
if (unended.length > 0) {
  process.stderr.write(`${unended.length} goals' events ended without Terminated (${unended.slice(0, 3).join(", ")}): no figures\n`)
  process.exitCode = 1
} else process.stdout.write(
  process.argv.includes("--json")
    ? `${JSON.stringify(figures)}\n`
    : `server CPU, µs per goal (or request), median of ${rounds} rounds:\n${Object.entries(figures).map(([name, us]) => `  ${name.padEnd(12)} ${us}`).join("\n")}\n`
)
