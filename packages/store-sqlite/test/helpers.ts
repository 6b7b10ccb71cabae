import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqliteStore } from "@rx/store-sqlite"

/** A fresh temp directory, removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-store-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A database path in a fresh temp directory. */
export const tempDb = Effect.map(tempDir, (dir) => path.join(dir, "rx.db"))

/** The store and a client over its own connection (for pragmas that simulate faults). */
export const layerWithClient: typeof SqliteStore.layerWithClient = SqliteStore.layerWithClient

/** A raw statement through a client. */
export const exec = (sql: string) => Effect.flatMap(SqlClient.SqlClient, (client) => client.unsafe(sql))
