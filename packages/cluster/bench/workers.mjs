// `pnpm --filter @rx/cluster run bench`: goals per second and iterations per second with 1, 2 and 3
// workers: real processes (test/fixtures/worker.mjs: a scripted instant model, five iterations a
// goal, tools that return at once) on a fresh database of the Postgres at RX_PG_URL (default: the
// tests' server), RX_BENCH_GOALS goals (120) submitted at once from this process. A benchmark,
// not a test: it prints one JSON line per worker count. Build first (`pnpm build`).
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Workers } from "@rx/cluster"

const adminUrl = process.env["RX_PG_URL"] ?? "postgres://rx:rx@127.0.0.1:5432/postgres"
const goals = Number(process.env["RX_BENCH_GOALS"] ?? "120")
const worker = fileURLToPath(new URL("../test/fixtures/worker.mjs", import.meta.url))
const settings = { failoverMs: 15_000, refreshAssignmentsMs: 500, pollMs: 1000, shardsPerGroup: 30 }

const admin = (statement) =>
  Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 }), (sql) => sql.unsafe(statement))).pipe(
    Effect.provide(Reactivity.layer)
  )

/** A fresh database, dropped with the scope. */
const database = Effect.acquireRelease(
  Effect.map(Effect.sync(() => `rx_bench_${Date.now().toString(36)}`), (name) => name).pipe(Effect.tap((name) => admin(`CREATE DATABASE ${name}`))),
  (name) => Effect.ignore(admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
)

const freePort = Effect.async((resume) => {
  const server = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address()
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** A worker process, up (it printed READY); killed with the scope. */
const startWorker = (args) =>
  Effect.acquireRelease(
    Effect.async((resume) => {
      const child = spawn(process.execPath, [worker, ...args], { stdio: ["ignore", "pipe", "pipe"] })
      let output = ""
      const timer = setTimeout(() => resume(Effect.dieMessage(`a worker did not start:\n${output}`)), 30_000)
      child.stdout.setEncoding("utf8").on("data", (chunk) => {
        output += chunk
        if (output.includes("READY")) {
          clearTimeout(timer)
          resume(Effect.succeed(child))
        }
      })
      child.stderr.setEncoding("utf8").on("data", (chunk) => (output += chunk))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

// The submitting process offers the workers' tool names, so the goals record them; it runs none.
const offered = (name) =>
  Tool.make({
    name,
    description: name,
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ text: Schema.String }),
    idempotent: name === "echo",
    execute: () => Effect.dieMessage("the benchmark process runs no tools")
  })
const tools = ToolRegistry.layer([offered("append"), offered("echo")])

const measure = (count) =>
  Effect.scoped(Effect.gen(function*() {
    const name = yield* database
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    const ledger = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "rx-bench-")), "ledger")
    for (let i = 1; i <= count; i++) {
      const port = yield* freePort
      yield* startWorker([`w${i}`, url.toString(), String(port), String(settings.failoverMs), ledger, "0"])
    }
    return yield* Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const started = performance.now()
      const ids = yield* Effect.forEach(Array.from({ length: goals }, (_, i) => i), (i) =>
        Workers.submit({ goal: `bench ${i}`, goalId: `bench-${i}`, options: { maxIterations: 20 } }))
      const submitted = (performance.now() - started) / 1000
      while (true) {
        const summaries = yield* Effect.forEach(ids, (id) => store.goal(id))
        if (summaries.every((s) => Option.isSome(s) && s.value.status === "terminated")) {
          const seconds = (performance.now() - started) / 1000
          const iterations = summaries.reduce((n, s) => n + (Option.isSome(s) ? s.value.iterations : 0), 0)
          return {
            workers: count,
            goals,
            iterations,
            seconds: Number(seconds.toFixed(2)),
            submitting_seconds: Number(submitted.toFixed(2)),
            goals_per_second: Number((goals / seconds).toFixed(1)),
            iterations_per_second: Number((iterations / seconds).toFixed(1))
          }
        }
        yield* Effect.sleep("50 millis")
      }
    }).pipe(Effect.provide(Layer.merge(Workers.layerClient({ url: url.toString(), ...settings }), tools)))
  }))

for (const count of [1, 2, 3]) console.log(JSON.stringify(await Effect.runPromise(measure(count))))
