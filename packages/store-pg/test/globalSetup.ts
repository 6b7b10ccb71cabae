/**
 * Postgres for the tests: when nothing answers on 127.0.0.1 as the test role, run
 * scripts/postgres.sh (as .ci/run does) to install and start it, then check again.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Effect, Redacted } from "effect"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { adminUrl } from "./database.js"

const script = fileURLToPath(new URL("../../../scripts/postgres.sh", import.meta.url))

const reachable = Effect.scoped(PgClient.make({ url: Redacted.make(adminUrl), connectTimeout: "3 seconds" })).pipe(
  Effect.provide(Reactivity.layer),
  Effect.as(true),
  Effect.catchAll(() => Effect.succeed(false))
)

export default async function setup() {
  if (await Effect.runPromise(reachable)) return
  const started = spawnSync("bash", [script], { stdio: "inherit" })
  if (started.status !== 0 || !(await Effect.runPromise(reachable))) {
    throw new Error(`Postgres is not reachable at ${adminUrl.replace(/:[^:@/]*@/, ":***@")} and ${script} could not start it; run it as root (sudo bash scripts/postgres.sh)`)
  }
}
