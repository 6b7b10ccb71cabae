/**
 * Confinement: whether a path is inside a root, and where a goal recorded that it works. The
 * tools, the server, the cluster and the CLI all ask these questions; they ask them here, so a
 * path is judged the same way everywhere.
 *
 * The path checks are lexical: give them absolute, normalized paths, and real paths (symbolic
 * links resolved) when the answer guards access; `realFolder` resolves a path first.
 */
import { FileSystem } from "@effect/platform"
import { Effect, Option } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

/** The segments of `candidate` below `root` (none for the root itself), or `undefined` when it is outside. Both absolute. */
export const segments = (root: string, candidate: string): ReadonlyArray<string> | undefined => {
  const relative = NodePath.relative(root, candidate)
  if (relative === "") return []
  if (NodePath.isAbsolute(relative)) return undefined
  const parts = relative.split(NodePath.sep)
  return parts[0] === ".." ? undefined : parts
}

/** Whether `candidate` is `root` or inside it. Both absolute. */
export const inside = (root: string, candidate: string): boolean => segments(root, candidate) !== undefined

/** Whether `candidate` is inside `root` and not the root itself. Both absolute. */
export const below = (root: string, candidate: string): boolean => (segments(root, candidate)?.length ?? 0) > 0

/** The real path of `candidate` (absolute) when it is a folder; none when it is missing or not a folder. */
export const realFolder = (candidate: string): Effect.Effect<Option.Option<string>, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const real = yield* fs.realPath(candidate)
    const info = yield* fs.stat(real)
    return info.type === "Directory" ? Option.some(real) : Option.none()
  }).pipe(Effect.orElseSucceed(() => Option.none<string>()))

/**
 * The real path of `candidate` (absolute) when it is a folder inside `root` (a real path) once
 * symbolic links are resolved; none when it is missing, not a folder, or leaves the root.
 */
export const folderInside = (root: string, candidate: string): Effect.Effect<Option.Option<string>, never, FileSystem.FileSystem> =>
  Effect.map(realFolder(candidate), Option.filter((real) => inside(root, real)))

/**
 * `realFolder` at once, with the system's `realpath` (one call; the asynchronous one walks the
 * path with an `lstat` per segment through the thread pool, a hundred times the CPU) and `stat`:
 * for a check made at every run. It blocks the process while the file system answers
 * (microseconds on a local disk), so use `realFolder` for a folder on a network volume.
 */
export const realFolderNow = (candidate: string): Option.Option<string> => {
  try {
    const real = NodeFs.realpathSync.native(candidate)
    return NodeFs.statSync(real, { throwIfNoEntry: false })?.isDirectory() === true ? Option.some(real) : Option.none()
  } catch {
    return Option.none()
  }
}

/** `folderInside` at once (see `realFolderNow`): the same answer, from the same checks. */
export const folderInsideNow = (root: string, candidate: string): Option.Option<string> =>
  Option.filter(realFolderNow(candidate), (real) => inside(root, real))
