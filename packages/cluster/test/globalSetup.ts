/**
 * Postgres for the tests (scripts/postgres.sh when nothing answers on 127.0.0.1, as in
 * @rx/store-pg), and the built package: the worker processes are plain Node running `dist/`.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Effect, Redacted } from "effect"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { adminUrl } from "../../store-pg/test/database.js"

const root = fileURLToPath(new URL("../../../", import.meta.url))
const script = `${root}scripts/postgres.sh`

const reachable = Effect.scoped(PgClient.make({ url: Redacted.make(adminUrl), connectTimeout: "3 seconds" })).pipe(
  Effect.provide(Reactivity.layer),
  Effect.as(true),
  Effect.catchAll(() => Effect.succeed(false))
)

export default async function setup() {
  const built = spawnSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, "-b", "packages/cluster/tsconfig.json"], {
    cwd: root,
    encoding: "utf8"
  })
  if (built.status !== 0) throw new Error(`building @rx/cluster (tsc -b packages/cluster) failed:\n${built.stdout}${built.stderr}`)
  if (await Effect.runPromise(reachable)) return
  const started = spawnSync("bash", [script], { stdio: "inherit" })
  if (started.status !== 0 || !(await Effect.runPromise(reachable))) {
    throw new Error(`Postgres is not reachable at ${adminUrl.replace(/:[^:@/]*@/, ":***@")} and ${script} could not start it; run it as root (sudo bash scripts/postgres.sh)`)
  }
}
