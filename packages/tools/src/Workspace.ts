/**
 * The folder the tools are confined to. Every path is resolved component by component and
 * checked before any I/O: `..`, absolute paths outside the root (a sibling sharing its prefix
 * included) and symbolic links, dangling or not, that lead outside are refused with a
 * `PathRefused` naming the path.
 *
 * What is guaranteed, on Linux: every file and directory is opened through the real path this
 * module resolved, and each opened descriptor's real path (`/proc/self/fd/N`) is checked against
 * what was resolved before anything is read from it or written into it. Writes go through an
 * opened parent directory (`/proc/self/fd/N/name`, like `openat`), into a temp file created with
 * `O_CREAT|O_EXCL` (which never follows a link), and are committed by `rename` (overwrite) or
 * `link` (create, which fails if the name appeared meanwhile) inside that directory. A symbolic
 * link swapped into any component after the check therefore cannot redirect a write outside the
 * workspace: the write is refused, or it replaces the link itself. Without `/proc` (not Linux),
 * paths are re-resolved instead, which narrows but does not close that window.
 *
 * Every open is first made non-blocking (node:fs, `O_NONBLOCK`) and checked with `fstat` on the
 * descriptor: a FIFO, socket or device swapped in after the check is refused, never waited on.
 * An overwrite holds the old file open from its first read; right before the rename it hashes it
 * again through that descriptor, then compares `fstat`/`lstat` stamps and renames in one
 * synchronous step, and puts the old file back if it is written to before a last look, a few
 * milliseconds after the rename.
 */
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Causes } from "@rx/kernel"
import { Context, Effect, Layer, Option, Schema, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { closeSync, constants, fstatSync, lstatSync, openSync } from "node:fs"
import * as NodePath from "node:path"
import { ToolsConfig } from "./Config.js"
import * as Confinement from "./Confinement.js"
import * as Files from "./internal/files.js"
import * as Text from "./internal/text.js"

/** A path the workspace will not touch: outside the root, through `..`, or a link leading out. */
export class PathRefused extends Schema.TaggedError<PathRefused>()("@rx/tools/PathRefused", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `path "${this.path}" is refused: ${this.reason}`
  }
}

/** The path does not exist. */
export class FileNotFound extends Schema.TaggedError<FileNotFound>()("@rx/tools/FileNotFound", {
  path: Schema.String
}) {
  override get message() {
    return `"${this.path}" does not exist; list_dir or find_files show what does`
  }
}

/** The path exists but is not what the operation needs (a directory where a file was expected). */
export class WrongType extends Schema.TaggedError<WrongType>()("@rx/tools/WrongType", {
  path: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message() {
    return `"${this.path}" is a ${this.actual}, not a ${this.expected}`
  }
}

/**
 * A write precondition failed: the file's sha256 is not the one the call expected. `null` stands
 * for "no file" on either side.
 */
export class StaleFile extends Schema.TaggedError<StaleFile>()("@rx/tools/StaleFile", {
  path: Schema.String,
  expected: Schema.NullOr(Schema.String),
  actual: Schema.NullOr(Schema.String),
  reason: Schema.String
}) {
  override get message() {
    return `"${this.path}": ${this.reason} (expected sha256 ${this.expected ?? "none"}, actual ${this.actual ?? "no file"})`
  }
}

/**
 * The file system failed (permissions, disk, I/O). `reason` is @effect/platform's; `code` the
 * errno (`ENAMETOOLONG`), which decides whether the model can work around it.
 */
export class FileSystemFailure extends Schema.TaggedError<FileSystemFailure>()("@rx/tools/FileSystemFailure", {
  path: Schema.String,
  operation: Schema.String,
  reason: Schema.String,
  detail: Schema.String,
  code: Schema.optional(Schema.String)
}) {
  override get message() {
    return `${this.operation} "${this.path}" failed (${this.reason}): ${this.detail}`
  }
}

/** The workspace root itself is unusable. */
export class InvalidWorkspace extends Schema.TaggedError<InvalidWorkspace>()("@rx/tools/InvalidWorkspace", {
  root: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `workspace "${this.root}" cannot be used: ${this.reason}`
  }
}

/**
 * The workspace's path no longer leads to the folder the tools were built for: it was moved,
 * replaced, or swapped for a symbolic link (by the agent's own command, or by another goal whose
 * workspace contains this one). The call is refused before it does anything.
 */
export class WorkspaceReplaced extends Schema.TaggedError<WorkspaceReplaced>()("@rx/tools/WorkspaceReplaced", {
  root: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `the workspace ${this.root} is no longer the folder this goal started in (${this.reason}); nothing was run. rx never follows a workspace that was moved, replaced or swapped for a link: restore the folder, or start a new goal on the folder that is there now`
  }
}

/** A folder's identity: its device and inode, as decimal strings (64-bit on some file systems). */
export interface Identity {
  readonly dev: string
  readonly ino: string
}

const identityOf = (fd: number): Identity => {
  const info = fstatSync(fd, { bigint: true })
  return { dev: info.dev.toString(), ino: info.ino.toString() }
}

/** Flags that open a folder itself, never what a link at its last component names. */
const directoryFlags = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

/**
 * Open `root` as a folder with no link followed at its last component and check it is the folder
 * `expected` names (by device and inode): the open descriptor, which the caller closes. Any
 * intermediate component that was swapped for a link leads to another folder, whose identity
 * differs.
 */
export const openIdentified = (root: string, expected: Identity): Effect.Effect<number, WorkspaceReplaced> =>
  Effect.suspend(() => {
    let fd: number
    try {
      fd = openSync(root, directoryFlags)
    } catch (error) {
      const code = Causes.codeOf(error) ?? "unknown"
      let link = code === "ELOOP"
      try {
        link ||= lstatSync(root).isSymbolicLink()
      } catch {
        // Gone: said below.
      }
      const reason = link
        ? "its path is now a symbolic link"
        : code === "ENOENT"
        ? "nothing is at its path any more"
        : code === "ENOTDIR"
        ? "its path no longer leads to a folder"
        : `it cannot be opened (${code})`
      return Effect.fail(new WorkspaceReplaced({ root, reason }))
    }
    let found: Identity
    try {
      found = identityOf(fd)
    } catch (error) {
      closeSync(fd)
      return Effect.fail(new WorkspaceReplaced({ root, reason: `it cannot be checked: ${String(error)}` }))
    }
    if (found.dev !== expected.dev || found.ino !== expected.ino) {
      closeSync(fd)
      return Effect.fail(
        new WorkspaceReplaced({
          root,
          reason: `its path now leads to another folder (device:inode ${found.dev}:${found.ino}, not ${expected.dev}:${expected.ino})`
        })
      )
    }
    return Effect.succeed(fd)
  })

/** Any error of a workspace operation. */
export type WorkspaceError = PathRefused | FileNotFound | WrongType | StaleFile | FileSystemFailure

/** The kind of a directory entry; links are reported, never followed, when listing. */
export const EntryType = Schema.Literal("file", "directory", "symlink", "other")
export type EntryType = typeof EntryType.Type

/** A path after resolution. */
export interface Resolved {
  /** The path as the caller gave it. */
  readonly input: string
  /** The real absolute path: no `.`, `..` or links in it. */
  readonly absolute: string
  /** `absolute` relative to the root, `/`-separated; `.` for the root itself. */
  readonly relative: string
  /** What is there now. */
  readonly type: EntryType | "missing"
}

/** A directory entry. */
export interface Entry {
  readonly name: string
  readonly type: EntryType
  /** Bytes, for files. */
  readonly size: number | undefined
}

/** A regular file opened for reading, its descriptor checked to be the resolved path. */
export interface OpenedFile {
  readonly resolved: Resolved
  readonly file: FileSystem.File
  readonly info: FileSystem.File.Info
}

/** The file a write replaces. */
export interface Current {
  readonly bytes: Uint8Array
  readonly sha256: string
  readonly mode: number
}

/** What a write did. */
export interface Written {
  readonly resolved: Resolved
  readonly created: boolean
  readonly previous: Option.Option<Current>
  readonly sha256: string
  readonly bytes: number
}

export interface Service {
  /** The real path of the root. */
  readonly root: string
  /** The root folder's identity when the tools were built; every call checks it (`verify`). */
  readonly identity: Identity
  /**
   * The root, opened again by its path with no link followed and checked to be the same folder:
   * a descriptor for the scope, to act on that folder and no other (the sandbox binds it).
   */
  readonly openRoot: Effect.Effect<number, WorkspaceReplaced, Scope.Scope>
  /** Fail unless the root's path still leads to the folder the tools were built for. */
  readonly verify: Effect.Effect<void, WorkspaceReplaced>
  /** Resolve a path (relative to the root, or absolute inside it) and check it. No I/O outside. */
  readonly resolve: (path: string, access?: Access) => Effect.Effect<Resolved, PathRefused | FileSystemFailure>
  /** Open a regular file for reading. */
  readonly open: (path: string) => Effect.Effect<OpenedFile, WorkspaceError, Scope.Scope>
  /** A directory's entries, sorted by name. */
  readonly list: (path: string) => Effect.Effect<{ readonly resolved: Resolved; readonly entries: ReadonlyArray<Entry> }, WorkspaceError>
  /**
   * Replace (or create) a file atomically. `compute` gets the current file, if any, and returns
   * the new content or fails (a precondition); if the file changes before the commit, the write
   * fails with `StaleFile`. Missing parent directories are created. Writes are serialized.
   */
  readonly write: <E>(
    path: string,
    compute: (current: Option.Option<Current>) => Effect.Effect<Uint8Array, E>,
    options?: WriteOptions
  ) => Effect.Effect<Written, E | WorkspaceError>
  /**
   * Remove the temp file (and the old file's second name, `backupName`) that a write of `path`
   * for the tool call `callId` left behind when rx stopped during it. True if there was a temp file.
   */
  readonly discardTemp: (path: string, callId: string) => Effect.Effect<boolean, WorkspaceError>
}

/** How a write is made. */
export interface WriteOptions {
  /**
   * The tool call writing. Its temp file is then named after the call (`tempName`), so that
   * recovery after a crash finds and removes exactly that file; otherwise the name is random.
   */
  readonly callId?: string
}

/**
 * The temp file of a write of the file `name` for the call `callId`, beside the target:
 * `.<name>.<first 12 hex digits of sha256(callId)>.rx-tmp`, the name cut to 200 bytes so the
 * temp name fits where the target's does.
 */
export const tempName = (name: string, callId: string): string => sideName(name, callTag(callId), "rx-tmp")

/**
 * The second name an overwrite gives the old file during the rename, to put it back if it was
 * written to at that instant: `.<name>.<tag>.rx-old`. Removed right after.
 */
export const backupName = (name: string, callId: string): string => sideName(name, callTag(callId), "rx-old")

const callTag = (callId: string): string => Text.sha256(Text.utf8(callId)).slice(0, 12)

const sideName = (name: string, tag: string, suffix: string): string =>
  `.${Text.decodeLenient(Text.utf8Prefix(Text.utf8(name), 200))}.${tag}.${suffix}`

export class Workspace extends Context.Tag("@rx/tools/Workspace")<Workspace, Service>() {}

/** A failure of @effect/platform's FileSystem as a `FileSystemFailure` naming the path. */
export const failure = (path: string, operation: string) => (error: PlatformError): FileSystemFailure => {
  const code = errorCode(error)
  return new FileSystemFailure({
    path,
    operation,
    reason: error._tag === "SystemError" ? error.reason : "BadArgument",
    detail: error.message,
    ...(code === undefined ? {} : { code })
  })
}

/** @effect/platform's reason for an errno, for failures of calls made with node:fs directly. */
const reasonOf = (code: string | undefined): string => {
  switch (code) {
    case "ENOENT":
      return "NotFound"
    case "EACCES":
      return "PermissionDenied"
    case "EEXIST":
      return "AlreadyExists"
    case "EISDIR":
    case "ENOTDIR":
    case "ELOOP":
      return "BadResource"
    case "EBUSY":
      return "Busy"
    default:
      return "Unknown"
  }
}

/** A failure of a node:fs call as a `FileSystemFailure` naming the path. */
const nodeFailure = (path: string, operation: string) => (error: Files.NodeError): FileSystemFailure =>
  new FileSystemFailure({
    path,
    operation,
    reason: reasonOf(error.code),
    detail: error.message,
    ...(error.code === undefined ? {} : { code: error.code })
  })

/**
 * How long an overwrite keeps watching the old file after the rename, beyond the directory's
 * fsync: a writer that opened it just before (an appender between its open and its write) has
 * this long to finish, and the old file is put back if it did.
 */
const settleMs = 5

/** Most links followed while resolving one path, as the kernel's own limit. */
const maxLinks = 40

const errorCode = (error: PlatformError): string | undefined => {
  if (error._tag !== "SystemError") return undefined
  const cause: unknown = error.cause
  if (typeof cause === "object" && cause !== null && "code" in cause) return String(cause.code)
  return undefined
}

const isReason = (error: PlatformError, reason: string): boolean =>
  error._tag === "SystemError" && error.reason === reason

const entryType = (info: FileSystem.File.Info): EntryType =>
  info.type === "File" ? "file" : info.type === "Directory" ? "directory" : info.type === "SymbolicLink" ? "symlink" : "other"

type Probe =
  | { readonly _tag: "Link"; readonly target: string }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "NotDirectory" }
  | { readonly _tag: "Present" }

/** What a resolved path is for: protected paths may be read, never written. */
export type Access = "read" | "write"

/**
 * Paths the tools refuse: `protectedPaths` to writes, `hiddenPaths` to everything (and left out
 * of listings). Entries are relative to the root or absolute inside it; an entry without `/`
 * (`.git`) matches that name in any folder. Compared case-insensitively (`.GIT` is `.git` on a
 * case-insensitive file system), on the path as given and on the path it resolves to (a link
 * into `.git` is refused too).
 */
export interface Protection {
  readonly protectedPaths: ReadonlyArray<string>
  readonly hiddenPaths: ReadonlyArray<string>
}

/** `.git` read-only, nothing hidden. */
export const defaultProtection: Protection = { protectedPaths: [".git"], hiddenPaths: [] }

/**
 * Make a workspace over `root`, which must be an existing directory. `protection` defaults to
 * the `ToolsConfig`'s when one is provided, else `defaultProtection`.
 */
export const make = (
  root: string,
  protection?: Protection
): Effect.Effect<Service, InvalidWorkspace, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const guarded = protection ?? Option.getOrElse(yield* Effect.serviceOption(ToolsConfig), () => defaultProtection)
    const configured = NodePath.resolve(root)
    const realRoot = yield* fs.realPath(configured).pipe(
      Effect.mapError((error) => new InvalidWorkspace({ root, reason: error.message }))
    )
    const rootInfo = yield* fs.stat(realRoot).pipe(
      Effect.mapError((error) => new InvalidWorkspace({ root, reason: error.message }))
    )
    if (rootInfo.type !== "Directory") {
      return yield* new InvalidWorkspace({ root, reason: "it is not a directory" })
    }
    // A guard given as an absolute path (a sub-goal's, inherited) that is or holds the root would not hold: refused.
    const covering = [...guarded.protectedPaths, ...guarded.hiddenPaths].find((entry) =>
      NodePath.isAbsolute(entry) && Confinement.inside(NodePath.normalize(entry), realRoot)
    )
    if (covering !== undefined) {
      return yield* new InvalidWorkspace({ root, reason: `it lies inside ${covering}, which its tools must not change` })
    }
    // The root is held open for the tools' life, so its inode cannot be reused by another folder.
    const held = yield* Effect.acquireRelease(
      Effect.try({
        try: () => openSync(realRoot, directoryFlags),
        catch: (error) => new InvalidWorkspace({ root, reason: `it cannot be opened: ${String(error)}` })
      }),
      (fd) => Effect.sync(() => closeSync(fd))
    )
    const identity = identityOf(held)
    const openRoot = Effect.acquireRelease(openIdentified(realRoot, identity), (fd) => Effect.sync(() => closeSync(fd)))
    const verifyRoot = Effect.scoped(openRoot)
    const hasProc = yield* fs.exists("/proc/self/fd").pipe(Effect.orElseSucceed(() => false))
    const writes = yield* Effect.makeSemaphore(1)

    const relativeOf = (absolute: string): string => {
      const rel = NodePath.relative(realRoot, absolute)
      return rel === "" ? "." : rel.split(NodePath.sep).join("/")
    }

    const probe = (path: string, input: string): Effect.Effect<Probe, FileSystemFailure> =>
      fs.readLink(path).pipe(
        Effect.map((target): Probe => ({ _tag: "Link", target })),
        Effect.catchAll((error) => {
          if (isReason(error, "NotFound")) return Effect.succeed<Probe>({ _tag: "Missing" })
          const code = errorCode(error)
          if (code === "EINVAL") return Effect.succeed<Probe>({ _tag: "Present" })
          if (code === "ENOTDIR") return Effect.succeed<Probe>({ _tag: "NotDirectory" })
          return Effect.fail(failure(input, "resolve")(error))
        })
      )

    /** The segments below the root of an absolute, normalized path; `undefined` if outside. */
    const insideRoot = (absolute: string): ReadonlyArray<string> | undefined => {
      // The root as configured may be a link to the real root: both name the workspace.
      for (const base of [realRoot, configured]) {
        const below = Confinement.segments(base, absolute)
        if (below !== undefined) return below
      }
      return undefined
    }

    /** The segments of a path below the root, or a refusal. */
    const segmentsOf = (input: string): Effect.Effect<ReadonlyArray<string>, PathRefused> => {
      if (input.includes("\0")) return Effect.fail(new PathRefused({ path: input, reason: "it contains a NUL byte" }))
      const segments = input.split("/").filter((segment) => segment !== "" && segment !== ".")
      if (segments.includes("..")) {
        return Effect.fail(new PathRefused({ path: input, reason: "\"..\" is not allowed; use a path inside the workspace" }))
      }
      if (NodePath.isAbsolute(input)) {
        const inside = insideRoot(NodePath.normalize(input))
        return inside === undefined
          ? Effect.fail(new PathRefused({ path: input, reason: `it is outside the workspace ${realRoot}; use a path inside it` }))
          : Effect.succeed(inside)
      }
      return Effect.succeed(segments)
    }

    /** Walk segments from the root, following links only while they stay inside. */
    const walk = (
      input: string,
      segments: ReadonlyArray<string>,
      hops: number
    ): Effect.Effect<{ readonly absolute: string; readonly exists: boolean; readonly hops: number }, PathRefused | FileSystemFailure> =>
      Effect.gen(function*() {
        let current = realRoot
        let linksFollowed = hops
        for (let i = 0; i < segments.length; i++) {
          const segment = segments[i] ?? ""
          const next = NodePath.join(current, segment)
          const found = yield* probe(next, input)
          if (found._tag === "Missing" || found._tag === "NotDirectory") {
            return { absolute: NodePath.join(next, ...segments.slice(i + 1)), exists: false, hops: linksFollowed }
          }
          if (found._tag === "Present") {
            current = next
            continue
          }
          linksFollowed++
          if (linksFollowed > maxLinks) {
            return yield* new PathRefused({ path: input, reason: "too many symbolic links" })
          }
          // Checked lexically, so a link that leads out is refused without touching what it names.
          const target = insideRoot(NodePath.resolve(current, found.target))
          if (target === undefined) {
            return yield* new PathRefused({
              path: input,
              reason: `"${relativeOf(next)}" is a symbolic link to ${found.target}, which is outside the workspace`
            })
          }
          const inner = yield* walk(input, target, linksFollowed)
          linksFollowed = inner.hops
          if (!inner.exists) {
            return { absolute: NodePath.join(inner.absolute, ...segments.slice(i + 1)), exists: false, hops: linksFollowed }
          }
          current = inner.absolute
        }
        return { absolute: current, exists: true, hops: linksFollowed }
      })

    const rules = ([["read-only", guarded.protectedPaths], ["hidden", guarded.hiddenPaths]] as const).flatMap(([kind, entries]) =>
      entries.flatMap((entry) => {
        const segments = NodePath.isAbsolute(entry)
          ? insideRoot(NodePath.normalize(entry))
          : entry.split("/").filter((segment) => segment !== "" && segment !== ".")
        if (segments === undefined || segments.length === 0 || segments.includes("..")) return []
        return [{ kind, entry, anywhere: !entry.includes("/"), segments: segments.map((segment) => segment.toLowerCase()) }]
      })
    )

    /** Why `relative` (`/`-separated, below the root) is refused for `access`, if it is. */
    const guard = (relative: ReadonlyArray<string>, access: Access): string | undefined => {
      const path = relative.map((segment) => segment.toLowerCase())
      for (const rule of rules) {
        if (rule.kind === "read-only" && access === "read") continue
        const starts = rule.anywhere ? path.map((_, index) => index) : [0]
        if (starts.some((start) => rule.segments.every((segment, i) => path[start + i] === segment))) {
          return rule.kind === "hidden"
            ? `it is inside "${rule.entry}", which is hidden from the agent`
            : `it is inside "${rule.entry}", which the agent may read but not change`
        }
      }
      return undefined
    }

    const resolve = (input: string, access: Access = "read"): Effect.Effect<Resolved, PathRefused | FileSystemFailure> =>
      Effect.gen(function*() {
        const segments = yield* segmentsOf(input)
        const walked = yield* walk(input, segments, 0)
        const relative = relativeOf(walked.absolute)
        const refused = guard(segments, access) ?? guard(relative === "." ? [] : relative.split("/"), access)
        if (refused !== undefined) return yield* new PathRefused({ path: input, reason: refused })
        let type: Resolved["type"] = "missing"
        if (walked.exists) {
          const info = yield* fs.stat(walked.absolute).pipe(Effect.option)
          type = Option.match(info, { onNone: () => "missing" as const, onSome: entryType })
        }
        return { input, absolute: walked.absolute, relative, type }
      })

    const fdPath = (file: FileSystem.File): string => `/proc/self/fd/${file.fd}`

    /** A name inside an opened directory, resolved through the descriptor where `/proc` allows. */
    const child = (dir: FileSystem.File, dirPath: string, name: string): string =>
      hasProc ? `${fdPath(dir)}/${name}` : NodePath.join(dirPath, name)

    /** Check that an opened descriptor is the file at `expected`. */
    const verify = (file: FileSystem.File, expected: string, input: string): Effect.Effect<void, PathRefused | FileSystemFailure> =>
      (hasProc ? fs.readLink(fdPath(file)) : fs.realPath(expected)).pipe(
        Effect.mapError(failure(input, "verify")),
        Effect.flatMap((actual) =>
          actual === expected
            ? Effect.void
            : Effect.fail(
              new PathRefused({ path: input, reason: `it changed while being opened and now leads to ${actual}` })
            )
        )
      )

    /**
     * Open what is at `at` (checked to be `expected`) for reading, as a `want`. The first open is
     * non-blocking and its descriptor is `fstat`ed, so a FIFO, socket or device swapped in after
     * the path was checked is refused instead of blocking rx or being read; the file is then
     * opened again through that descriptor (`/proc/self/fd/N`), which names the same inode.
     */
    const openChecked = (
      at: string,
      expected: string,
      input: string,
      want: "file" | "directory"
    ): Effect.Effect<FileSystem.File, PathRefused | FileNotFound | WrongType | FileSystemFailure, Scope.Scope> =>
      Effect.gen(function*() {
        const probe = yield* Files.openNonBlocking(at).pipe(
          Effect.mapError((error): FileNotFound | WrongType | FileSystemFailure => {
            if (error.code === "ENOENT") return new FileNotFound({ path: input })
            if (error.code === "ENOTDIR") return new WrongType({ path: input, expected: "directory", actual: "file" })
            // A socket cannot be opened at all.
            if (error.code === "ENXIO") return new WrongType({ path: input, expected: want, actual: "socket or device" })
            return nodeFailure(input, "open")(error)
          })
        )
        const kind = Files.kindOf(probe.stats)
        if (kind !== want) return yield* new WrongType({ path: input, expected: want, actual: kind })
        const file = yield* fs.open(hasProc ? `/proc/self/fd/${probe.fd}` : at, { flag: "r" }).pipe(
          Effect.mapError(failure(input, "open"))
        )
        if (!hasProc) {
          // Reopened by path: it must still be the inode checked above.
          const again = yield* Files.fstamp(file.fd).pipe(Effect.mapError(nodeFailure(input, "stat")))
          if (again.ino !== probe.stats.ino || again.dev !== probe.stats.dev) {
            return yield* new PathRefused({ path: input, reason: "it changed while being opened" })
          }
        }
        yield* verify(file, expected, input)
        return file
      })

    /** Open the directory at a resolved path, one component at a time from the root. */
    const openDirectory = (absolute: string, input: string, create: boolean) =>
      Effect.gen(function*() {
        let dir = yield* openChecked(realRoot, realRoot, input, "directory")
        let current = realRoot
        const rel = NodePath.relative(realRoot, absolute)
        for (const segment of rel === "" ? [] : rel.split(NodePath.sep)) {
          const next = NodePath.join(current, segment)
          const at = child(dir, current, segment)
          if (create) {
            yield* fs.makeDirectory(at).pipe(
              Effect.catchIf((error) => isReason(error, "AlreadyExists"), () => Effect.void),
              Effect.mapError(failure(input, "create directory"))
            )
          }
          dir = yield* openChecked(at, next, input, "directory")
          current = next
        }
        return dir
      })

    /** What a path is, in words, for a refusal that does not open it. */
    const describe = (absolute: string): Effect.Effect<string> =>
      fs.stat(absolute).pipe(
        Effect.map(Files.kindOfInfo),
        Effect.orElseSucceed(() => "special file")
      )

    const open = (input: string): Effect.Effect<OpenedFile, WorkspaceError, Scope.Scope> =>
      Effect.gen(function*() {
        const resolved = yield* resolve(input)
        if (resolved.type === "missing") return yield* new FileNotFound({ path: input })
        if (resolved.type === "other") {
          return yield* new WrongType({ path: input, expected: "file", actual: yield* describe(resolved.absolute) })
        }
        if (resolved.type !== "file") return yield* new WrongType({ path: input, expected: "file", actual: resolved.type })
        const file = yield* openChecked(resolved.absolute, resolved.absolute, input, "file")
        const info = yield* file.stat.pipe(Effect.mapError(failure(input, "stat")))
        return { resolved, file, info }
      })

    const list = (input: string) =>
      Effect.scoped(Effect.gen(function*() {
        const resolved = yield* resolve(input)
        if (resolved.type === "missing") return yield* new FileNotFound({ path: input })
        if (resolved.type !== "directory") {
          const actual = resolved.type === "other" ? yield* describe(resolved.absolute) : resolved.type
          return yield* new WrongType({ path: input, expected: "directory", actual })
        }
        const dir = yield* openDirectory(resolved.absolute, input, false)
        const names = yield* fs.readDirectory(hasProc ? fdPath(dir) : resolved.absolute).pipe(
          Effect.mapError(failure(input, "list"))
        )
        const base = resolved.relative === "." ? [] : resolved.relative.split("/")
        const sorted = [...names]
          .filter((name) => guard([...base, name], "read") === undefined)
          .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
        const entries = yield* Effect.forEach(sorted, (name) =>
          Effect.gen(function*() {
            const at = child(dir, resolved.absolute, name)
            const found = yield* probe(at, input)
            if (found._tag === "Link") return { name, type: "symlink" as const, size: undefined }
            const info = yield* fs.stat(at).pipe(Effect.option)
            return Option.match(info, {
              onNone: () => ({ name, type: "other" as const, size: undefined }),
              onSome: (info): Entry => ({
                name,
                type: entryType(info),
                size: info.type === "File" ? Number(info.size) : undefined
              })
            })
          }))
        return { resolved, entries }
      }))

    /** The file a write replaces, held open until the commit, with its stamp before it was read. */
    interface Held extends Current {
      readonly file: FileSystem.File
      readonly stamp: Files.Stamp
    }

    /** The file at `at` (inside an opened directory), if there is one, held open in the scope. */
    const readCurrent = (
      at: string,
      expected: string,
      input: string
    ): Effect.Effect<Option.Option<Held>, PathRefused | WrongType | FileSystemFailure, Scope.Scope> =>
      Effect.gen(function*() {
        const opened = yield* openChecked(at, expected, input, "file").pipe(
          Effect.map(Option.some),
          Effect.catchTag("@rx/tools/FileNotFound", () => Effect.succeed(Option.none<FileSystem.File>()))
        )
        if (Option.isNone(opened)) return Option.none<Held>()
        const file = opened.value
        const stamp = yield* Files.fstamp(file.fd).pipe(Effect.mapError(nodeFailure(input, "stat")))
        const info = yield* file.stat.pipe(Effect.mapError(failure(input, "stat")))
        const bytes = yield* Files.readAll(file).pipe(Effect.mapError(failure(input, "read")))
        return Option.some<Held>({ bytes, sha256: Text.sha256(bytes), mode: info.mode & 0o7777, file, stamp })
      })

    const changed = (input: string, previous: Current, actual: string | null, reason: string): StaleFile =>
      new StaleFile({ path: input, expected: previous.sha256, actual, reason })

    /** Another writer reached the old file around the rename. */
    const interfered = (input: string, previous: Current, how: "rolled-back" | "lost"): Effect.Effect<never, StaleFile> =>
      Effect.fail(changed(
        input,
        previous,
        "unknown",
        how === "rolled-back"
          ? "the file was written to while it was being replaced, so it was left as it is, with that write; read it again"
          : "the new content was written, but something wrote to the old file at the same time and that write is lost; read the file again"
      ))

    const write = <E>(
      input: string,
      compute: (current: Option.Option<Current>) => Effect.Effect<Uint8Array, E>,
      options?: WriteOptions
    ): Effect.Effect<Written, E | WorkspaceError> =>
      writes.withPermits(1)(Effect.scoped(Effect.gen(function*() {
        const resolved = yield* resolve(input, "write")
        if (resolved.relative === "." || resolved.type === "directory") {
          return yield* new WrongType({ path: input, expected: "file", actual: "directory" })
        }
        // A FIFO or device: opening it could block or do more than read a file.
        if (resolved.type === "other") {
          return yield* new WrongType({ path: input, expected: "file", actual: yield* describe(resolved.absolute) })
        }
        const parent = NodePath.dirname(resolved.absolute)
        const name = NodePath.basename(resolved.absolute)
        const dir = yield* openDirectory(parent, input, true)
        const target = child(dir, parent, name)
        const held = yield* readCurrent(target, resolved.absolute, input)
        const previous = Option.map(held, ({ bytes, mode, sha256 }): Current => ({ bytes, sha256, mode }))
        const bytes = yield* compute(previous)
        const callId = options?.callId
        const tag = callId === undefined ? randomBytes(6).toString("hex") : callTag(callId)
        const temp = child(dir, parent, sideName(name, tag, "rx-tmp"))
        const backup = child(dir, parent, sideName(name, tag, "rx-old"))
        const commit = Effect.gen(function*() {
          yield* Effect.scoped(Effect.gen(function*() {
            // O_CREAT|O_EXCL: never follows a link, never reuses a file.
            const file = yield* fs.open(temp, { flag: "wx", mode: 0o666 }).pipe(Effect.mapError(failure(input, "create temp file")))
            yield* file.writeAll(bytes).pipe(Effect.mapError(failure(input, "write")))
            if (Option.isSome(previous)) {
              yield* fs.chmod(hasProc ? fdPath(file) : temp, previous.value.mode).pipe(Effect.mapError(failure(input, "chmod")))
            }
            yield* file.sync.pipe(Effect.mapError(failure(input, "fsync")))
          }))
          if (Option.isNone(held)) {
            // link(2) fails if the name exists: a file created meanwhile is never clobbered.
            yield* fs.link(temp, target).pipe(
              Effect.catchIf(
                (error) => isReason(error, "AlreadyExists"),
                () =>
                  Effect.fail(
                    new StaleFile({ path: input, expected: null, actual: "unknown", reason: "the file was created by someone else meanwhile" })
                  )
              ),
              Effect.mapError((error) => error._tag === "@rx/tools/StaleFile" ? error : failure(input, "link")(error))
            )
            yield* fs.remove(temp).pipe(Effect.ignore)
          } else {
            const current = held.value
            // The content, read again through the descriptor held since the first read.
            const again = yield* Files.hashFile(current.file).pipe(Effect.mapError(failure(input, "read")))
            if (again !== current.sha256) {
              return yield* changed(input, current, again, "the file changed while it was being written; read it again")
            }
            // Then, with no yield before the rename: the held file unchanged (size, times) and
            // still the one the path names; and after it, not written to meanwhile.
            const replaced = yield* Files.replaceIfUnchanged(current.file.fd, target, temp, backup, (now, named) =>
              !Files.sameStamp(now, current.stamp)
                ? changed(input, current, "unknown", "the file changed while it was being written; read it again")
                : named === undefined || named.ino !== now.ino || named.dev !== now.dev
                ? changed(input, current, "unknown", "the file was replaced by someone else while it was being written; read it again")
                : undefined).pipe(
                Effect.mapError((error) => error instanceof StaleFile ? error : nodeFailure(input, "rename")(error))
              )
            if (replaced === "rolled-back" || replaced === "lost") return yield* interfered(input, current, replaced)
            // A writer that opened the old file just before the rename has until the directory is
            // synced and `settleMs` more to finish its write: the old file is watched till then.
            yield* dir.sync.pipe(Effect.mapError(failure(input, "fsync directory")))
            yield* Files.realDelay(settleMs)
            const settled = yield* Files.settle(current.file.fd, target, backup, replaced).pipe(
              Effect.mapError(nodeFailure(input, "rename"))
            )
            if (settled !== "replaced") return yield* interfered(input, current, settled)
          }
          yield* dir.sync.pipe(Effect.mapError(failure(input, "fsync directory")))
        })
        // What an interrupted or refused commit leaves: the temp file, the old file's second name.
        yield* commit.pipe(Effect.onError(() => Effect.all([fs.remove(temp), fs.remove(backup)].map(Effect.ignore))))
        return { resolved: { ...resolved, type: "file" as const }, created: Option.isNone(previous), previous, sha256: Text.sha256(bytes), bytes: bytes.length }
      })))

    const discardTemp = (input: string, callId: string): Effect.Effect<boolean, WorkspaceError> =>
      Effect.scoped(Effect.gen(function*() {
        const resolved = yield* resolve(input)
        if (resolved.relative === ".") return false
        const parent = NodePath.dirname(resolved.absolute)
        const dir = yield* openDirectory(parent, input, false).pipe(
          Effect.map(Option.some),
          Effect.catchTag("@rx/tools/FileNotFound", () => Effect.succeed(Option.none<FileSystem.File>()))
        )
        if (Option.isNone(dir)) return false
        const name = NodePath.basename(resolved.absolute)
        const removed = yield* Effect.forEach([tempName(name, callId), backupName(name, callId)], (side) =>
          fs.remove(child(dir.value, parent, side)).pipe(
            Effect.as(true),
            Effect.catchIf((error) => isReason(error, "NotFound"), () => Effect.succeed(false)),
            Effect.mapError(failure(input, "remove temp file"))
          ))
        return removed[0] === true
      }))

    return { root: realRoot, identity, openRoot, verify: verifyRoot, resolve, open, list, write, discardTemp }
  })

/** A workspace over `root`. */
export const layer = (root: string, protection?: Protection): Layer.Layer<Workspace, InvalidWorkspace, FileSystem.FileSystem> =>
  Layer.scoped(Workspace, make(root, protection))
