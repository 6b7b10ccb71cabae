import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import type { Config } from "@rx/store-sqlite"

/** A fresh temp directory, removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-store-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A database path in a fresh temp directory. */
export const tempDb = Effect.map(tempDir, (dir) => path.join(dir, "rx.db"))

/** The store and its client (for pragmas that simulate faults), over one connection. */
export const layerWithClient = (config: Config.Input) =>
  Layer.effect(StateStore.StateStore, SqliteStore.make(config)).pipe(Layer.provideMerge(SqliteStore.layerClient(config)))

/** A raw statement through a client. */
export const exec = (sql: string) =>
  Effect.flatMap(SqliteClient.SqliteClient, (client) => client.unsafe(sql))
