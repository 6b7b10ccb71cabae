/**
 * Workers and clients starting at once on a new database all open the log's and the cluster's
 * tables. @effect/cluster creates its own with `CREATE TABLE IF NOT EXISTS` and no lock, which
 * Postgres refuses to one of two processes racing ("duplicate key value violates unique
 * constraint"): seen in CI, and here with the two cores kept busy, before the open was retried.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as TestDatabase from "../../store-pg/test/database.js"

const script = fileURLToPath(new URL("./fixtures/open.mjs", import.meta.url))

const open = (url: string) =>
  Effect.async<string>((resume) => {
    execFile(process.execPath, [script, url], { timeout: 30_000 }, (_error, stdout, stderr) => resume(Effect.succeed(`${stdout}${stderr}`.trim())))
  })

describe("the cluster's storage", () => {
  it.scoped("six processes opening a new database at once all start", () =>
    Effect.gen(function*() {
      for (let round = 0; round < 2; round++) {
        const { url } = yield* TestDatabase.fresh
        const outputs = yield* Effect.forEach(Array.from({ length: 6 }), () => open(url), { concurrency: "unbounded" })
        expect(outputs.filter((output) => output !== "OPEN")).toEqual([])
      }
    }), 120_000)
})
