/**
 * The database file before SQLite opens it: rx creates a log only where no file exists, and
 * never turns an existing file (0 bytes, not SQLite) into one. A new log is built under a
 * temporary name and linked into place, so no process ever sees a half-created file at the
 * path, and two processes creating it at once both end up on the same, complete log.
 */
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Causes, StateStore } from "@rx/kernel"
import * as Migrations from "../Migrations.js"
import * as Database from "./database.js"
import { DatabaseRefused, toStoreError } from "./errors.js"
import { processExists } from "./lease.js"

/** The first 16 bytes of every SQLite database file. */
const sqliteHeader = Buffer.from("SQLite format 3\0", "latin1")

/** How `prepare` found the file: already there (and SQLite), or just created by this call. */
export type Prepared = "existing" | "created"

interface Options {
  readonly filename: string
  readonly readonly: boolean
  readonly create: boolean
  readonly busyTimeoutMs: number
}


/** The file's size and its first bytes, or undefined when it does not exist. */
const probe = (filename: string) =>
  Effect.try({
    try: () => {
      const stat = fs.statSync(filename, { throwIfNoEntry: false })
      if (stat === undefined) return undefined
      if (!stat.isFile()) return { size: stat.size, file: false, head: Buffer.alloc(0), wal: false }
      const head = Buffer.alloc(sqliteHeader.length + 4)
      const fd = fs.openSync(filename, "r")
      const read = Either.try(() => fs.readSync(fd, head, 0, head.length, 0))
      fs.closeSync(fd)
      const bytes = Either.isRight(read) ? read.right : 0
      // Header bytes 18 and 19, the file format's write and read versions: 2 in WAL mode.
      const wal = bytes >= 20 && head[18] === 2 && head[19] === 2
      return { size: stat.size, file: true, head: head.subarray(0, Math.min(bytes, sqliteHeader.length)), wal }
    },
    catch: (error) => new StateStore.StoreError({ message: `cannot read ${filename}: ${error instanceof Error ? error.message : String(error)}` })
  })

/**
 * Check the file is one rx may open, creating a new log when it does not exist and `create`
 * allows it (never when read-only). A missing file (otherwise), an empty file, a folder or a
 * file that is not SQLite is a `DatabaseRefused`, the file untouched.
 */
export const prepare = (options: Options): Effect.Effect<Prepared, StateStore.StoreError | DatabaseRefused> =>
  Effect.gen(function*() {
    const { filename } = options
    if (!options.readonly) yield* Effect.sync(() => sweep(filename))
    const found = yield* probe(filename)
    if (found === undefined) {
      if (options.readonly || !options.create) {
        return yield* new DatabaseRefused({
          filename,
          reason: "missing",
          message: `no rx database at ${filename}`
        })
      }
      yield* create(options)
      return "created"
    }
    if (!found.file) {
      return yield* new DatabaseRefused({ filename, reason: "not-sqlite", message: `${filename} is not a file; rx will not use it as its log` })
    }
    if (found.size === 0) {
      return yield* new DatabaseRefused({
        filename,
        reason: "empty",
        message: `${filename} is an empty file (0 bytes), not an rx log; rx will not turn it into a new, empty log. If it was your log, it was truncated: restore it from a backup; otherwise remove it`
      })
    }
    if (found.wal) yield* Effect.sync(() => journalAside(filename))
    if (!found.head.equals(sqliteHeader)) {
      return yield* new DatabaseRefused({
        filename,
        reason: "not-sqlite",
        message: `${filename} is not a SQLite database (it does not start with the SQLite header); rx never overwrites it: restore it from a backup or choose another file`
      })
    }
    return "existing"
  })

let created = 0

const creatingName = /^\.(.+)\.(\d+)\.\d+\.creating(?:-wal|-shm|-journal)?$/

/**
 * Remove what a process killed while creating the log beside `filename` left (its temporary
 * database, `.<name>.<pid>.<n>.creating`, and its journal), once that process is gone.
 */
const sweep = (filename: string): void => {
  const dir = path.dirname(filename)
  const names = Either.getOrElse(Either.try(() => fs.readdirSync(dir)), () => [])
  for (const name of names) {
    const match = creatingName.exec(name)
    if (match === null || match[1] !== path.basename(filename) || processExists(Number(match[2]))) continue
    Either.try(() => fs.rmSync(path.join(dir, name), { force: true }))
  }
}

/**
 * A rollback journal beside a WAL log was not written by rx (WAL mode writes none), so it may
 * have been planted to be "rolled back" into the log when SQLite next opens it: it is renamed
 * aside, `<name>-journal.refused-by-rx`, before SQLite can see it.
 */
const journalAside = (filename: string): void => {
  const journal = `${filename}-journal`
  if (fs.lstatSync(journal, { throwIfNoEntry: false }) === undefined) return
  Either.try(() => fs.renameSync(journal, `${journal}.refused-by-rx`))
}

/** Build a new log under a temporary name beside `filename`, then link it into place (unless someone was first). */
const create = (options: Options) =>
  Effect.gen(function*() {
    const { filename } = options
    const dir = path.dirname(filename)
    const temp = path.join(dir, `.${path.basename(filename)}.${process.pid}.${++created}.creating`)
    // Best effort: a leftover temporary file is harmless (its name is never opened again).
    const cleanup = Effect.sync(() => {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) Either.try(() => fs.rmSync(`${temp}${suffix}`, { force: true }))
    })
    const where = { ...options, what: `creating ${filename}` }
    if (!fs.existsSync(dir)) {
      return yield* new StateStore.StoreError({ message: `cannot create ${filename}: its folder ${dir} does not exist` })
    }
    yield* Effect.scoped(Effect.gen(function*() {
      const db = yield* Database.open({ filename: temp, readonly: false, fileMustExist: false, busyTimeoutMs: options.busyTimeoutMs }).pipe(
        Effect.mapError((error) => toStoreError({ ...where, filename: dir }, error))
      )
      yield* Migrations.run(db.sql, { ...options, filename, readonly: false, create: true })
      // WAL from the start, so the log never needs switching once other processes have it open.
      yield* db.read((tx) => Either.right(tx.all("PRAGMA journal_mode = WAL"))).pipe(Effect.mapError((error) => toStoreError(where, error)))
    })).pipe(
      Effect.zipRight(Effect.suspend(() =>
        Either.match(place(temp, filename), {
          onLeft: (error) => Effect.fail(toStoreError(where, error)),
          onRight: () => Effect.void
        })
      )),
      Effect.ensuring(cleanup)
    )
  })

/** Link `temp` to `filename`; a file already there (another process created it) is kept. */
const place = (temp: string, filename: string): Either.Either<void, unknown> => {
  const linked = Either.try(() => fs.linkSync(temp, filename))
  if (Either.isRight(linked) || Causes.codeOf(linked.left) === "EEXIST") return Either.void
  // Filesystems without hard links: an exclusive copy, which also never replaces a file.
  const copied = Either.try(() => fs.copyFileSync(temp, filename, fs.constants.COPYFILE_EXCL))
  return Either.isLeft(copied) && Causes.codeOf(copied.left) !== "EEXIST" ? copied : Either.void
}
