/**
 * Goal workspaces: a client names a folder relative to the server's root, and gets it only if
 * it is a folder that stays inside the root once `..` and symlinks are resolved.
 */
import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { BadRequest } from "../ApiError.js"

/** Whether `candidate` (absolute) is `root` or inside it. */
export const inside = (path: Path.Path, root: string, candidate: string): boolean => {
  const relative = path.relative(root, candidate)
  return relative === "" || (!path.isAbsolute(relative) && relative.split(path.sep)[0] !== "..")
}

/** The real path of a folder, if it is one. */
const folder = (fs: FileSystem.FileSystem, target: string) =>
  Effect.gen(function*() {
    const real = yield* fs.realPath(target)
    const info = yield* fs.stat(real)
    return info.type === "Directory" ? real : undefined
  }).pipe(Effect.orElseSucceed(() => undefined))

/** The real path of the client's `relative` folder inside `root` (a real path); the root itself when none is given. */
export const resolve = (root: string, relative: string | undefined): Effect.Effect<string, BadRequest, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const refuse = (why: string) => new BadRequest({ field: "workspace", message: `workspace ${JSON.stringify(relative)}: ${why}` })
    if (relative === undefined || relative === "" || relative === ".") return root
    if (relative.includes("\u0000")) return yield* refuse("not a path")
    if (path.isAbsolute(relative)) return yield* refuse("must be relative to the server's workspace root")
    const target = path.resolve(root, relative)
    if (!inside(path, root, target)) return yield* refuse("leaves the server's workspace root")
    const real = yield* folder(fs, target)
    if (real === undefined) return yield* refuse("no such folder in the server's workspace root")
    if (!inside(path, root, real)) return yield* refuse("leaves the server's workspace root through a symbolic link")
    return real
  })

/** A recorded workspace (absolute), if it is a folder inside `root`: goals from elsewhere are not run here. */
export const recorded = (root: string, workspace: unknown): Effect.Effect<string | undefined, never, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    if (typeof workspace !== "string" || !path.isAbsolute(workspace)) return undefined
    const real = yield* folder(fs, workspace)
    return real !== undefined && inside(path, root, real) ? real : undefined
  })
