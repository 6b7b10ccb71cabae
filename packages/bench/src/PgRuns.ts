/**
 * `pnpm --filter @rx/bench run pg-runs [GOALS] [ITERATIONS]` (default 20 and 30): goals run at once
 * by `Runner.run` on a Postgres log (`PgStore`, a new database on the server of `RX_PG_URL`, else
 * `postgres://rx:rx@127.0.0.1:5432/postgres`, dropped after), the benchmark's scripted model and
 * `echo`; one round to warm up, then three. Prints, per iteration: wall time, this process's CPU
 * time, and the database's committed transactions (`pg_stat_database.xact_commit`: every query
 * outside a transaction is one; the statistics lag by up to half a second).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Runner, Tool, ToolRegistry } from "@rx/kernel"
import { PgStore } from "@rx/store-pg"
import { Effect, Layer, Redacted } from "effect"
import { model } from "./Serve.js"

const admin = process.env["RX_PG_URL"] ?? "postgres://rx:rx@127.0.0.1:5432/postgres"
const [goals = 20, iterations = 30] = process.argv.slice(2).map(Number)
const name = `rx_bench_${Date.now().toString(36)}`
const url = Object.assign(new URL(admin), { pathname: `/${name}` }).toString()

const onAdmin = <A>(f: (sql: PgClient.PgClient) => Effect.Effect<A, unknown>) =>
  Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(admin), maxConnections: 1 }), f)).pipe(Effect.provide(Reactivity.layer))

const committed = onAdmin((sql) => sql<{ readonly n: string }>`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = ${name}`).pipe(
  Effect.map((rows) => Number(rows[0]?.n ?? Number.NaN))
)

let named = 0
const round = Effect.forEach(
  Array.from({ length: goals }, () => `pg goal ${named++}`),
  (goal) => Runner.run({ goal, options: { maxIterations: iterations, noProgressWindow: iterations + 1 } }),
  { concurrency: "unbounded", discard: true }
).pipe(Effect.provide(Layer.mergeAll(ToolRegistry.layer([Tool.echo]), model(iterations))))

const program = Effect.gen(function*() {
  yield* round
  const before = { transactions: yield* committed, cpu: process.cpuUsage(), at: performance.now() }
  for (let r = 0; r < 3; r++) yield* round
  const cpu = process.cpuUsage(before.cpu)
  const total = 3 * goals * iterations
  const transactions = (yield* committed) - before.transactions
  process.stdout.write(`${JSON.stringify({
    goals,
    iterations,
    wall_us_per_iteration: Math.round(((performance.now() - before.at) * 1000) / total),
    cpu_us_per_iteration: Math.round((cpu.user + cpu.system) / total),
    transactions_per_iteration: Number((transactions / total).toFixed(2))
  })}\n`)
}).pipe(Effect.provide(PgStore.layer({ url })))

await Effect.runPromise(
  Effect.acquireUseRelease(
    onAdmin((sql) => sql.unsafe(`CREATE DATABASE ${name}`)),
    () => program,
    () => Effect.orDie(onAdmin((sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  )
)
