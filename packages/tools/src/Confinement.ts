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
