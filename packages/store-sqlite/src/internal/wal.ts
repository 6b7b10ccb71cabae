/**
 * The log's `-wal` file, watched for another process deleting or replacing it while the store
 * has the log open. SQLite keeps writing commits to the file it opened: once that file is gone
 * from the folder, every process that opens the log next reads it without those commits (or
 * fails on a short read), and a kill before this store closes loses them for good. Nothing in
 * SQLite reports it, so the store checks after each commit that the path still names the file
 * SQLite writes to: a `stat` of the path (about 1 µs), compared by device and inode with what it
 * saw first. The file SQLite holds open keeps its inode while the store runs, so no other file
 * can take that inode meanwhile.
 */
import { Either } from "effect"
import * as fs from "node:fs"

interface Identity {
  readonly dev: number
  readonly ino: number
}

export interface Watch {
  /** The `-wal` file's path. */
  readonly path: string
  /**
   * After a commit: why the `-wal` at `path` is not the file SQLite writes to (deleted, replaced,
   * or not even statable), or undefined when it is.
   */
  readonly check: () => string | undefined
}

/** The file at `path` (undefined when there is none), or why it cannot be statted. */
const identity = (path: string): Either.Either<Identity | undefined, string> =>
  Either.try({
    try: () => {
      const stat = fs.statSync(path, { throwIfNoEntry: false })
      return stat === undefined ? undefined : { dev: stat.dev, ino: stat.ino }
    },
    catch: (error) => (error instanceof Error ? error.message : String(error))
  })

/**
 * Watch `${filename}-wal` from now: the file there now, if any, is the one SQLite opened (it opens
 * the `-wal` of a log in WAL mode at its first read); otherwise the one there after the first
 * commit (which always leaves a `-wal` in WAL mode).
 */
export const watch = (filename: string): Watch => {
  // SQLite resolves symbolic links in the log's path and keeps the -wal beside the file itself.
  const real = Either.getOrElse(Either.try(() => fs.realpathSync(filename)), () => filename)
  const path = `${real}-wal`
  let seen = Either.getOrUndefined(identity(path))
  return {
    path,
    check: () => {
      const now = identity(path)
      if (Either.isLeft(now)) return `cannot be checked (${now.left})`
      if (now.right === undefined) return "was deleted"
      if (seen === undefined) {
        seen = now.right
        return undefined
      }
      return now.right.dev === seen.dev && now.right.ino === seen.ino ? undefined : "was replaced by another file"
    }
  }
}
