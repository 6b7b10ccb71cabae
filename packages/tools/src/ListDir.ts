/**
 * `list_dir {path?, depth?}`: the entries below a directory (default the workspace root), sorted,
 * depth-first, down to `depth` levels (default 1, at most 10). Paths are relative to the
 * workspace root. Symbolic links are listed as `symlink` and never followed; `.git` and
 * `node_modules` are listed but not entered. At most `maxEntries` entries (default 1000).
 */
import { Tool } from "@rx/kernel"
import { Effect, Schema } from "effect"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import { readOnly } from "./internal/readOnly.js"
import * as Walk from "./internal/walk.js"
import { EntryType, Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  path: Schema.optional(Schema.String).annotations({ description: "Directory, relative to the workspace root. Default: the root." }),
  depth: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, 10))).annotations({
    description: "Levels to descend: 1 lists only the directory's own entries. Default 1."
  })
})
export type Input = typeof Input.Type

export const Entry = Schema.Struct({
  /** Relative to the workspace root. */
  path: Schema.String,
  type: EntryType,
  /** Bytes, for files. */
  size: Schema.optional(Schema.Int)
})

export const Output = Schema.Struct({
  path: Schema.String,
  resolved_path: Schema.String,
  entries: Schema.Array(Entry),
  /** True when more entries exist than were returned. */
  truncated: Schema.Boolean
})
export type Output = typeof Output.Type

export const tool = Tool.make({
  name: "list_dir",
  description:
    "List a directory of the workspace (default its root), depth levels deep (default 1). Entries are sorted, with their type and size; paths are relative to the workspace root.",
  input: Input,
  output: Output,
  ...readOnly,
  execute: (input) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const path = input.path ?? "."
      const resolved = yield* workspace.resolve(path)
      const entries: Array<typeof Entry.Type> = []
      let truncated = false
      yield* Walk.walk(workspace, resolved.relative, input.depth ?? 1, ({ entry, path }) =>
        Effect.sync(() => {
          if (entries.length >= config.maxEntries) {
            truncated = true
            return false
          }
          entries.push(entry.size === undefined ? { path, type: entry.type } : { path, type: entry.type, size: entry.size })
          return true
        }))
      return { path, resolved_path: resolved.absolute, entries, truncated }
    }).pipe(Effect.mapError(Errors.toToolError))
})
