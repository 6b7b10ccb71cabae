/**
 * The log a setting names (`--db`, `RX_DB`, else the default), as a Layer of the kernel's
 * `StateStore`: a SQLite file, or a Postgres database. A log that cannot be opened is one line a
 * user can act on.
 */
import { FileSystem, Path } from "@effect/platform"
import { StateStore } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { Console, Context, Effect, Layer, Option } from "effect"
import * as Postgres from "./internal/postgres.js"
import { terminal } from "./Notes.js"
import * as Settings from "./Settings.js"
import { UsageError } from "./Settings.js"

/**
 * How a command uses the log: `create` (a new log where no file exists: `rx run`, `rx serve`),
 * `write` (an existing log: resume, cancel, approve) or `read` (read-only: list, inspect, events).
 */
export type Access = "create" | "write" | "read"

/** A refused database as one line a user can act on. */
const explain = (db: Settings.Database) => (error: SqliteStore.DatabaseRefused | StateStore.StoreError) => {
  if (error._tag === "@rx/kernel/StoreError") return error
  switch (error.reason) {
    case "missing":
      return new UsageError({ message: `no rx database at ${db.file} (rx run creates one; pass --db or set RX_DB)` })
    case "damaged":
      return new UsageError({ message: `${error.message} (rx doctor --db ${db.file} reports everything it finds)` })
    default:
      return new UsageError({ message: error.message })
  }
}

/**
 * The log the flag names (see `Settings.database`). When the default log is used while
 * `./.rx/rx.db`, where an earlier rx kept its log, exists, a note says so: rx never switches logs
 * silently, nor picks up a log inside a workspace.
 */
export const database = (flag: Option.Option<string>) =>
  Effect.tap(Settings.database(flag), (db) =>
    Effect.gen(function*() {
      if (db.source !== "default") return
      const fs = yield* FileSystem.FileSystem
      const legacy = (yield* Path.Path).resolve(".rx", "rx.db")
      if (legacy === db.file || !(yield* fs.exists(legacy).pipe(Effect.orElseSucceed(() => false)))) return
      yield* Console.error(terminal(
        `rx: note: ${legacy} is a log of an earlier rx, which kept it in the current folder; this rx uses ${db.file}. To keep using the old log, pass --db ${legacy} (or set RX_DB), best after moving it out of the workspace`
      ))
    }))

/**
 * The log at `db`. Only `create` makes a folder (0700: the log holds every tool output) and a
 * new file; a folder made for a log named by `--db` or `RX_DB` is said on stderr. A Postgres log
 * is migrated when it opens.
 */
export const layer = (db: Settings.Database, access: Access): Layer.Layer<StateStore.StateStore, UsageError | StateStore.StoreError, FileSystem.FileSystem | Path.Path> => {
  if (db.postgres) return crashPoint(Postgres.log(db))
  const store = crashPoint(SqliteStore.layer({ filename: db.file, readonly: access === "read", create: access === "create" }).pipe(Layer.mapError(explain(db))))
  if (access !== "create") return store
  return Layer.unwrapEffect(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const folder = path.dirname(db.file)
    // A folder made for a log named by --db or RX_DB is said, with the log: a mistyped path shows.
    const made = db.source !== "default" && !(yield* fs.exists(folder).pipe(Effect.orElseSucceed(() => true)))
    yield* fs.makeDirectory(folder, { recursive: true, mode: 0o700 }).pipe(
      Effect.mapError((error) => new UsageError({ message: `cannot create the folder of the database ${db.file}: ${error.message}` }))
    )
    if (made) {
      yield* Console.error(terminal(
        `rx: note: made the folder ${folder} for a new log, ${db.label} (named by ${db.source === "flag" ? "--db" : "RX_DB"}); if that path is a typo, remove the folder and give the right one`
      ))
    }
    return store
  }))
}

/**
 * For crash tests only: with `RX_CRASH_AFTER_COMMITS=N` in its environment, the process kills
 * itself with SIGKILL right after its N-th commit to the log, so a test stops a real rx exactly
 * between two commits (a tree of goals run in one process included). Unset, the store is as is.
 */
const crashPoint = <E, R>(store: Layer.Layer<StateStore.StateStore, E, R>): Layer.Layer<StateStore.StateStore, E, R> => {
  const after = Number(process.env["RX_CRASH_AFTER_COMMITS"] ?? "")
  if (!Number.isSafeInteger(after) || after < 1) return store
  let commits = 0
  return Layer.map(store, (context) => {
    const inner = Context.get(context, StateStore.StateStore)
    return Context.add(context, StateStore.StateStore, {
      ...inner,
      append: (goalId, expectedSeq, events, state) =>
        Effect.tap(inner.append(goalId, expectedSeq, events, state), () =>
          Effect.sync(() => {
            commits++
            if (commits === after) process.kill(process.pid, "SIGKILL")
          }))
    })
  })
}

/** Whether the log exists: a SQLite file there (anything at the path counts: the store says what is wrong with it), or a Postgres log. */
export const exists = (db: Settings.Database) =>
  db.postgres ? Effect.succeed(true) : Effect.flatMap(FileSystem.FileSystem, (fs) => fs.exists(db.file).pipe(Effect.orElseSucceed(() => true)))

/** A goal the log does not hold, said with the log it looked in. */
export const noGoal = (goalId: string, db: Settings.Database) =>
  new UsageError({
    message: `no goal with id ${goalId} in the database ${db.label} (rx list${db.source === "flag" ? ` --db ${shellWord(db.label)}` : ""} shows its goals; --db or RX_DB names another)`
  })

/** `text` as one word of a shell command line. */
export const shellWord = (text: string) => (/^[\w./:@-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`)

/** The token file of the server whose log is `db`: beside it, 0600. */
export const tokenFile = (db: Settings.Database) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    // A Postgres log has no folder here: the token goes where the default log would be.
    return path.join(path.dirname(db.postgres ? yield* Settings.defaultDb : db.file), "rx-server.token")
  })
