/**
 * A server's bearer token kept in a file, so clients on the machine find it and open inspector tabs
 * keep working across restarts; written without following a link. A folder beside a log inside a
 * workspace is one an agent could reach before its files were hidden (or with no sandbox), so
 * what is found there is trusted only when it is exactly what this module writes, and a write
 * never goes through what is found there.
 */
import { Causes } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, mkdirSync, openSync, readdirSync, readSync, renameSync, unlinkSync, writeSync } from "node:fs"
import { basename, dirname, join } from "node:path"

/** The token file could not be written: `message` says why. */
export class TokenFileError extends Schema.TaggedError<TokenFileError>()("@rx/server/TokenFileError", {
  file: Schema.String,
  message: Schema.String
}) {}

/** A new token: 32 random bytes, base64url (43 characters). */
export const generate = (): string => randomBytes(32).toString("base64url")

/** What a token file holds: a token rx could have generated, on one line. */
const tokenText = /^[A-Za-z0-9_-]{32,512}\n?$/

/**
 * The token in `file`, if the file is one rx wrote for this user: opened without following a
 * link (and without waiting on a FIFO), a regular file with one name, owned by this user, mode
 * 0600, holding one token. Anything else (a link, a folder, another owner, wider rights, an empty
 * placeholder) is not reused: a new token replaces it.
 */
export const read = (file: string): Effect.Effect<Option.Option<string>> =>
  Effect.sync(() => {
    let fd: number
    try {
      fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch {
      return Option.none()
    }
    try {
      const info = fstatSync(fd)
      const uid = process.getuid?.()
      if (!info.isFile() || info.nlink !== 1 || (info.mode & 0o777) !== 0o600 || (uid !== undefined && info.uid !== uid) || info.size > 1024) {
        return Option.none()
      }
      const buffer = Buffer.alloc(1025)
      const read = readSync(fd, buffer, 0, buffer.length, 0)
      const text = buffer.subarray(0, read).toString("utf8")
      return tokenText.test(text) ? Option.some(text.trim()) : Option.none()
    } catch {
      return Option.none()
    } finally {
      closeSync(fd)
    }
  })

/** A file system call, its error kept as the failure. */
const attempt = <A>(call: () => A): Effect.Effect<A, unknown> => Effect.try({ try: call, catch: (error) => error })

/** A temporary token file of `write`: `.<name>.<pid>.<random>.tmp`, beside the token file. */
const temporaryName = /^\.(.+)\.(\d+)\.[0-9a-f]+\.tmp$/

/** Whether process `pid` exists (not ours to signal counts). */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return Causes.codeOf(error) === "EPERM"
  }
}

/**
 * Remove the temporary files a process killed while writing `file` left beside it, once that
 * process is gone (each holds a token that was never renamed into place, so never served).
 */
const sweep = (file: string): void => {
  const dir = dirname(file)
  let names: ReadonlyArray<string> = []
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    const match = temporaryName.exec(name)
    if (match === null || match[1] !== basename(file) || alive(Number(match[2]))) continue
    try {
      unlinkSync(join(dir, name))
    } catch {
      // Best effort: another process may have removed it first.
    }
  }
}

/**
 * Write `token` to `file` with no link followed: its folder made (0700) if missing, then a new
 * name in it, created with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600, written and synced, then
 * renamed over `file`. A link planted at `file` is replaced, never written through. Not
 * interruptible, so an interrupted start leaves no temporary file; those of a killed writer are
 * removed by the next write.
 */
export const write = (file: string, token: string): Effect.Effect<void, TokenFileError> =>
  Effect.gen(function*() {
    yield* attempt(() => mkdirSync(dirname(file), { recursive: true, mode: 0o700 }))
    yield* Effect.sync(() => sweep(file))
    const temporary = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)
    const removeTemporary = Effect.ignore(attempt(() => unlinkSync(temporary)))
    yield* Effect.acquireUseRelease(
      attempt(() => openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)),
      (fd) =>
        attempt(() => {
          // The mode asked for may have lost bits to the umask; exactly 0600 is what a restart reuses.
          fchmodSync(fd, 0o600)
          const bytes = Buffer.from(`${token}\n`)
          let written = 0
          while (written < bytes.length) written += writeSync(fd, bytes, written)
          fsyncSync(fd)
        }),
      (fd) => Effect.ignore(attempt(() => closeSync(fd)))
    ).pipe(Effect.zipRight(attempt(() => renameSync(temporary, file))), Effect.tapError(() => removeTemporary))
    // The rename is durable once the folder is synced; a folder that cannot be synced still holds it.
    yield* Effect.ignore(Effect.acquireUseRelease(
      attempt(() => openSync(dirname(file), constants.O_RDONLY | constants.O_DIRECTORY)),
      (dir) => attempt(() => fsyncSync(dir)),
      (dir) => Effect.ignore(attempt(() => closeSync(dir)))
    ))
  }).pipe(
    Effect.uninterruptible,
    Effect.mapError((error) => new TokenFileError({ file, message: `cannot write the server token to ${file}: ${error instanceof Error ? error.message : String(error)}` }))
  )
