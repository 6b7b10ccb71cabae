/**
 * Goal workspaces: a client names a folder relative to the server's root, and gets it only if
 * it is a folder that stays inside the root once `..` and symlinks are resolved.
 */
import { FileSystem, Path } from "@effect/platform"
import { Confinement } from "@rx/tools"
import { Effect, Option } from "effect"
import * as NodePath from "node:path"
import { BadRequest } from "../ApiError.js"

/** The real path of the client's `relative` folder inside `root` (a real path); the root itself when none is given. */
export const resolve = (root: string, relative: string | undefined): Effect.Effect<string, BadRequest, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const refuse = (why: string) => new BadRequest({ field: "workspace", message: `workspace ${JSON.stringify(relative)}: ${why}` })
    if (relative === undefined || relative === "" || relative === ".") return root
    if (relative.includes("\u0000")) return yield* refuse("not a path")
    if (path.isAbsolute(relative)) return yield* refuse("must be relative to the server's workspace root")
    const target = path.resolve(root, relative)
    if (!Confinement.inside(root, target)) return yield* refuse("leaves the server's workspace root")
    // At once: the system's realpath, not the thread pool's walk (see `Confinement.realFolderNow`).
    const real = Confinement.realFolderNow(target)
    if (Option.isNone(real)) return yield* refuse("no such folder in the server's workspace root")
    if (!Confinement.inside(root, real.value)) return yield* refuse("leaves the server's workspace root through a symbolic link")
    return real.value
  })

/**
 * A recorded workspace (absolute), if it is a folder inside `root` once links are resolved: goals
 * from elsewhere are not run here. Checked at every run, at once (`Confinement.folderInsideNow`).
 */
export const recorded = (root: string, workspace: string | undefined): Effect.Effect<string | undefined> =>
  Effect.sync(() =>
    workspace === undefined || !NodePath.isAbsolute(workspace) ? undefined : Option.getOrUndefined(Confinement.folderInsideNow(root, workspace))
  )
