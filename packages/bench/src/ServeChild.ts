/**
 * The served path's server in a process of its own: `node ServeChild.js <concurrency>
 * <iterations> [<delay ms>] [--steps memory|normal|full]` serves `Server.layer` on 127.0.0.1
 * (port 0) over the memory store with the benchmark's scripted model and `echo`, and prints
 * `{"url": ...}` once it listens. With `--steps`, the log is the one named (the memory store, or a
 * new SQLite file, `synchronous` NORMAL or FULL) and `echo` notes when each of its calls starts
 * and ends. Then, one JSON line in per request on stdin, one out on stdout:
 *
 * - `"cpu"`: `{"cpu": µs}`, this process's CPU time so far (user + system, `process.cpuUsage`);
 * - `"commits"`: `{"commits": [[goalId:seq, ms], ...]}`, when each event's append succeeded, as
 *   `performance.timeOrigin + performance.now()` (milliseconds since the epoch, comparable across
 *   processes on this machine), and forgets them; noted only with a delay (the SSE latency run);
 * - `"steps"`: `{"steps": [[goalId, start ms, end ms], ...]}`, each `echo` call since the last
 *   request (`performance.now()`), and forgets them; noted only with `--steps`.
 *
 * The end of stdin closes the server and ends the process (so `--cpu-prof` writes its profile).
 */
import { StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { Effect, Layer, Logger, LogLevel, Queue, Schema, Stream } from "effect"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { model, serve, StepsStore, timedEcho, timedMemory } from "./Serve.js"
import * as TempDir from "./TempDir.js"

const args = process.argv.slice(2)
const stepsAt = args.indexOf("--steps")
const [concurrency = "100", iterations = "10", delay] = stepsAt === -1 ? args : args.slice(0, stepsAt)

/** A new SQLite log in a folder removed with the scope. */
const sqlite = (synchronous: "NORMAL" | "FULL") =>
  Layer.unwrapScoped(Effect.map(TempDir.make("rx-bench-steps-"), (dir) => SqliteStore.layer({ filename: join(dir, "rx.db"), synchronous })))
const write = (value: unknown) => Effect.sync(() => void process.stdout.write(`${JSON.stringify(value)}\n`))

const program = Effect.gen(function*() {
  const steps = stepsAt === -1 ? undefined : yield* Schema.decodeUnknown(StepsStore)(args[stepsAt + 1])
  const committed = new Map<string, number>()
  const calls: Array<readonly [string, number, number]> = []
  const llm = model(Number(iterations), delay === undefined ? undefined : Number(delay))
  // Commits are timed for the SSE latency only (a model with a delay): the throughput rounds run
  // on the memory store as is, as the in-process rounds they are compared with.
  const store = steps === "normal" || steps === "full"
    ? sqlite(steps === "full" ? "FULL" : "NORMAL")
    : delay === undefined
    ? StateStore.layerMemory
    : timedMemory(committed, () => performance.timeOrigin + performance.now())
  const url = yield* serve(Number(concurrency), llm, store, steps === undefined ? undefined : timedEcho(calls))
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
      if (request === "\"steps\"") return write({ steps: calls.splice(0) })
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
