/**
 * Reading opened files in bounded chunks, and the few operations @effect/platform's FileSystem
 * does not offer: a non-blocking open, and a replacement checked with `fstat`/`lstat` stamps
 * taken without yielding right before and after the rename.
 */
import type { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, Either, Option, type Scope } from "effect"
import { createHash } from "node:crypto"
import * as NodeFs from "node:fs"

/** Bytes read per call. */
export const chunkSize = 64 * 1024

/** Read a file from its current position to the end, one chunk at a time. */
export const forEachChunk = <E>(
  file: FileSystem.File,
  f: (chunk: Uint8Array) => Effect.Effect<void, E>
): Effect.Effect<void, E | PlatformError> =>
  Effect.gen(function*() {
    while (true) {
      const chunk = yield* file.readAlloc(chunkSize)
      if (Option.isNone(chunk)) return
      yield* f(chunk.value)
    }
  })

/** Read a whole file. */
export const readAll = (file: FileSystem.File): Effect.Effect<Uint8Array, PlatformError> =>
  Effect.gen(function*() {
    const chunks: Array<Uint8Array> = []
    yield* forEachChunk(file, (chunk) => Effect.sync(() => chunks.push(chunk)))
    return Buffer.concat(chunks)
  })

/** The sha256 of a file from its start, read in chunks (the position is moved to the end). */
export const hashFile = (file: FileSystem.File): Effect.Effect<string, PlatformError> =>
  Effect.gen(function*() {
    yield* file.seek(0, "start")
    const hash = createHash("sha256")
    yield* forEachChunk(file, (chunk) => Effect.sync(() => hash.update(chunk)))
    return hash.digest("hex")
  })

/** What a path or descriptor is, in words a message can use. */
export type Kind = "file" | "directory" | "symbolic link" | "FIFO" | "socket" | "character device" | "block device" | "unknown"

/** The kind of a `stat` result. */
export const kindOf = (stats: NodeFs.BigIntStats | NodeFs.Stats): Kind =>
  stats.isFile()
    ? "file"
    : stats.isDirectory()
    ? "directory"
    : stats.isSymbolicLink()
    ? "symbolic link"
    : stats.isFIFO()
    ? "FIFO"
    : stats.isSocket()
    ? "socket"
    : stats.isCharacterDevice()
    ? "character device"
    : stats.isBlockDevice()
    ? "block device"
    : "unknown"

/** The kind of @effect/platform's file info. */
export const kindOfInfo = (info: FileSystem.File.Info): Kind => {
  switch (info.type) {
    case "File":
      return "file"
    case "Directory":
      return "directory"
    case "SymbolicLink":
      return "symbolic link"
    case "FIFO":
      return "FIFO"
    case "Socket":
      return "socket"
    case "CharacterDevice":
      return "character device"
    case "BlockDevice":
      return "block device"
    default:
      return "unknown"
  }
}

/** An error of a Node file system call: its errno code, when it has one. */
export interface NodeError {
  readonly code: string | undefined
  readonly message: string
}

const nodeError = (error: unknown): NodeError => ({
  code: typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined,
  message: error instanceof Error ? error.message : String(error)
})

// O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting forever.
// O_NOCTTY: a terminal device never becomes rx's controlling terminal.
const readNonBlocking = NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK | NodeFs.constants.O_NOCTTY

/** A descriptor opened without blocking, and what `fstat` says it is. */
export interface Probe {
  readonly fd: number
  readonly stats: NodeFs.BigIntStats
}

/**
 * Open `path` read-only without blocking, whatever it is (a FIFO, a device), and `fstat` the
 * descriptor, so the caller decides by what was opened, not by what a path named a moment before.
 * Closed when the scope closes.
 */
export const openNonBlocking = (path: string): Effect.Effect<Probe, NodeError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<number, NodeError>((resume) => {
      NodeFs.open(path, readNonBlocking, (error, fd) => resume(error ? Effect.fail(nodeError(error)) : Effect.succeed(fd)))
    }),
    (fd) => Effect.async<void>((resume) => NodeFs.close(fd, () => resume(Effect.void)))
  ).pipe(
    Effect.flatMap((fd) =>
      Effect.async<Probe, NodeError>((resume) => {
        NodeFs.fstat(fd, { bigint: true }, (error, stats) =>
          resume(error ? Effect.fail(nodeError(error)) : Effect.succeed({ fd, stats })))
      })
    )
  )

/** What identifies a file's content cheaply: inode, size and change times (nanoseconds). */
export interface Stamp {
  readonly dev: bigint
  readonly ino: bigint
  readonly size: bigint
  readonly mtimeNs: bigint
  readonly ctimeNs: bigint
}

const stampOf = (stats: NodeFs.BigIntStats): Stamp => ({
  dev: stats.dev,
  ino: stats.ino,
  size: stats.size,
  mtimeNs: stats.mtimeNs,
  ctimeNs: stats.ctimeNs
})

/** Two stamps of the same unchanged file. */
export const sameStamp = (a: Stamp, b: Stamp): boolean =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs

/** The stamp of an opened descriptor. */
export const fstamp = (fd: number): Effect.Effect<Stamp, NodeError> =>
  Effect.try({ try: () => stampOf(NodeFs.fstatSync(fd, { bigint: true })), catch: nodeError })

/** How a checked replacement ended. */
export type Replaced =
  /** The new content is in place, and the old file was not written to meanwhile. */
  | "replaced"
  /** A write reached the old file around the replacement: the old file, with that write, was put back. */
  | "rolled-back"
  /** Such a write reached the old file, and the new one was written to as well: the new content stays, that write is lost. */
  | "lost"

/** A replacement made and still watched: the old file keeps its second name until `settle`. */
export interface Watched {
  readonly _tag: "Watched"
  /** The old file's stamp when it was last found unchanged before the rename. */
  readonly held: Stamp
  /** The new file's stamp as written, before the rename. */
  readonly written: Stamp | undefined
  readonly backedUp: boolean
}

const statOrUndefined = (path: string): NodeFs.BigIntStats | undefined =>
  NodeFs.lstatSync(path, { bigint: true, throwIfNoEntry: false })

/**
 * Whether the old file (descriptor `fd`) was written to since `watched.held`; if so, put it back
 * under `target` (from `backup`) unless the new file was written to as well. Synchronous.
 */
const verdict = (fd: number, target: string, backup: string, watched: Watched): "unchanged" | "rolled-back" | "lost" => {
  const after = stampOf(NodeFs.fstatSync(fd, { bigint: true }))
  // link and rename change the old file's ctime, not its size or mtime.
  if (after.size === watched.held.size && after.mtimeNs === watched.held.mtimeNs) return "unchanged"
  const now = statOrUndefined(target)
  const written = watched.written
  const newUntouched = written !== undefined && now !== undefined && now.ino === written.ino &&
    now.size === written.size && now.mtimeNs === written.mtimeNs
  if (!watched.backedUp || !newUntouched) {
    if (watched.backedUp) Either.try(() => NodeFs.unlinkSync(backup))
    return "lost"
  }
  NodeFs.renameSync(backup, target)
  return "rolled-back"
}

/**
 * Replace `target` (whose opened descriptor is `fd`) by `temp`, with no yield in between: `check`
 * runs on fresh `fstat`/`lstat` stamps of the held file and of what `target` names now, and only
 * if it returns `undefined` is `temp` renamed over `target`. Before the rename the old file gets a
 * second name, `backup`; right after it, the held file is stamped again: if it was written to
 * around the rename (a writer that opened it just before), the old file is renamed back, so that
 * write is not lost, unless the new file was written to as well. Otherwise the replacement is
 * `Watched`: `settle` looks once more, later, for a writer slower to finish.
 */
export const replaceIfUnchanged = <E>(
  fd: number,
  target: string,
  temp: string,
  backup: string,
  check: (held: Stamp, named: Stamp | undefined) => E | undefined
): Effect.Effect<Watched | "rolled-back" | "lost", E | NodeError> =>
  Effect.suspend((): Effect.Effect<Watched | "rolled-back" | "lost", E | NodeError> => {
    try {
      const held = stampOf(NodeFs.fstatSync(fd, { bigint: true }))
      const named = statOrUndefined(target)
      const refused = check(held, named === undefined || !named.isFile() ? undefined : stampOf(named))
      if (refused !== undefined) return Effect.fail(refused)
      const temporary = statOrUndefined(temp)
      // A second name for the old file, to put it back; without one (a file system without hard
      // links), the rename goes ahead unguarded.
      const backedUp = Either.isRight(Either.try(() => NodeFs.linkSync(target, backup)))
      NodeFs.renameSync(temp, target)
      const watched: Watched = { _tag: "Watched", held, written: temporary === undefined ? undefined : stampOf(temporary), backedUp }
      const result = verdict(fd, target, backup, watched)
      return Effect.succeed(result === "unchanged" ? watched : result)
    } catch (error) {
      return Effect.fail(nodeError(error))
    }
  })

/**
 * Wait `ms` of real time. Not `Effect.sleep`: the wait is for other processes, which a test
 * clock does not move.
 */
export const realDelay = (ms: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/**
 * End the watch of a replacement: look at the old file once more (a writer that opened it before
 * the rename may have written since), put it back if needed as `replaceIfUnchanged` does, and
 * remove its second name otherwise. What remains unwatched: a writer that keeps the old file open
 * past this point writes into a file no longer in the folder. POSIX has no compare-and-swap rename.
 */
export const settle = (fd: number, target: string, backup: string, watched: Watched): Effect.Effect<Replaced, NodeError> =>
  Effect.try({
    try: (): Replaced => {
      const result = verdict(fd, target, backup, watched)
      if (result !== "unchanged") return result
      if (watched.backedUp) Either.try(() => NodeFs.unlinkSync(backup))
      return "replaced"
    },
    catch: nodeError
  })
