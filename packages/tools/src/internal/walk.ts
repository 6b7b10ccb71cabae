/** Depth-first, sorted walks of a workspace directory for the listing and search tools. */
import { Effect } from "effect"
import type * as Workspace from "../Workspace.js"

/** Directories listed but never descended into by the walking tools. */
export const skippedDirectories: ReadonlySet<string> = new Set([".git", "node_modules"])

/** An entry met on a walk; `path` is relative to the workspace root, `/`-separated. */
export interface Visited {
  readonly path: string
  readonly depth: number
  readonly entry: Workspace.Entry
}

const join = (dir: string, name: string): string => (dir === "." ? name : `${dir}/${name}`)

/**
 * Visit entries below `start` (a resolved directory, relative to the root) in sorted depth-first
 * order, down to `maxDepth` levels (1: only its entries). `visit` returns false to stop the walk.
 * Links are visited, not followed; `skippedDirectories` are visited, not entered.
 */
export const walk = <E>(
  workspace: Workspace.Service,
  start: string,
  maxDepth: number,
  visit: (visited: Visited) => Effect.Effect<boolean, E>
): Effect.Effect<boolean, E | Workspace.WorkspaceError> => {
  const go = (dir: string, depth: number): Effect.Effect<boolean, E | Workspace.WorkspaceError> =>
    Effect.gen(function*() {
      const { entries } = yield* workspace.list(dir)
      for (const entry of entries) {
        const path = join(dir, entry.name)
        if (!(yield* visit({ path, depth, entry }))) return false
        if (entry.type === "directory" && depth < maxDepth && !skippedDirectories.has(entry.name)) {
          if (!(yield* go(path, depth + 1))) return false
        }
      }
      return true
    })
  return go(start, 1)
}
