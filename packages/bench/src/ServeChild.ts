/**
 * The served path's server in a process of its own: `node ServeChild.js <concurrency>
 * <iterations> [<delay ms>]` serves `Server.layer` on 127.0.0.1 (port 0) over the memory store
 * with the benchmark's scripted model and `echo`, and prints `{"url": ...}` once it listens.
 * Then, one JSON line in per request on stdin, one out on stdout:
 *
 * - `"cpu"`: `{"cpu": µs}`, this process's CPU time so far (user + system, `process.cpuUsage`);
 * - `"commits"`: `{"commits": [[goalId:seq, ms], ...]}`, when each event's append succeeded, as
 *   `performance.timeOrigin + performance.now()` (milliseconds since the epoch, comparable across
 *   processes on this machine), and forgets them; noted only with a delay (the SSE latency run).
 *
 * The end of stdin closes the server and ends the process (so `--cpu-prof` writes its profile).
 */
import { StateStore } from "@rx/kernel"
import { Effect, Logger, LogLevel, Queue, Stream } from "effect"
import { createInterface } from "node:readline"
import { model, serve, timedMemory } from "./Serve.js"

const [concurrency = "100", iterations = "10", delay] = process.argv.slice(2)
const write = (value: unknown) => Effect.sync(() => void process.stdout.write(`${JSON.stringify(value)}\n`))

const program = Effect.gen(function*() {
  const committed = new Map<string, number>()
  const llm = model(Number(iterations), delay === undefined ? undefined : Number(delay))
  // Commits are timed for the SSE latency only (a model with a delay): the throughput rounds run
  // on the memory store as is, as the in-process rounds they are compared with.
  const store = delay === undefined ? StateStore.layerMemory : timedMemory(committed, () => performance.timeOrigin + performance.now())
  const url = yield* serve(Number(concurrency), llm, store)
  yield* write({ url })
  const lines = yield* Queue.unbounded<string | null>()
  const input = createInterface({ input: process.stdin })
  input.on("line", (line) => Queue.unsafeOffer(lines, line))
  input.on("close", () => Queue.unsafeOffer(lines, null))
  yield* Stream.fromQueue(lines).pipe(
    Stream.takeWhile((line): line is string => line !== null),
    Stream.runForEach((line) => {
      const request = line.trim()
      if (request === "\"cpu\"") {
        const { system, user } = process.cpuUsage()
        return write({ cpu: user + system })
      }
      if (request === "\"commits\"") {
        const entries = [...committed]
        committed.clear()
        return write({ commits: entries })
      }
      return write({ error: `unknown request ${request}` })
    })
  )
}).pipe(
  Effect.scoped,
  // The server logs each goal's end at Info; stdout carries the replies.
  Logger.withMinimumLogLevel(LogLevel.Error)
)

Effect.runPromiseExit(program).then((exit) => {
  if (exit._tag === "Failure") process.stderr.write(`the bench server failed: ${String(exit.cause)}\n`)
  process.exit(exit._tag === "Failure" ? 1 : 0)
})
