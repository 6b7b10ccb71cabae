/**
 * `find_files {pattern, path?}`: files whose path matches a glob, below a directory (default
 * the workspace root). A pattern without `/` matches file names at any depth (`*.ts`); one with
 * `/` matches the path relative to `path` (`src/**\/*.ts`). Supports `*`, `**`, `?`, `[...]`
 * and `{a,b}`. Results are sorted, relative to the workspace root, at most `maxEntries`
 * (default 1000). Links are not followed; `.git` and `node_modules` are not entered.
 */
import { Tool } from "@rx/kernel"
import { Effect, Schema } from "effect"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Glob from "./internal/glob.js"
import { readOnly } from "./internal/readOnly.js"
import * as Walk from "./internal/walk.js"
import { Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  pattern: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "Glob such as \"*.ts\" (file names at any depth) or \"src/**/*.test.ts\" (paths below `path`)."
  }),
  path: Schema.optional(Schema.String).annotations({ description: "Directory to search, relative to the workspace root. Default: the root." })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  pattern: Schema.String,
  path: Schema.String,
  /** Matching files, relative to the workspace root, sorted. */
  files: Schema.Array(Schema.String),
  /** True when more files match than were returned, or the walk stopped at its bound. */
  truncated: Schema.Boolean
})
export type Output = typeof Output.Type

/** Entries a walk visits at most, so a huge tree cannot stall a call. */
const maxVisited = 200_000

export const tool = Tool.make({
  name: "find_files",
  description:
    "Find files by glob below a directory of the workspace (default its root). \"*.ts\" matches file names at any depth; a pattern with \"/\" matches the path relative to `path`.",
  input: Input,
  output: Output,
  ...readOnly,
  execute: (input) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const path = input.path ?? "."
      const regex = Glob.compile(input.pattern)
      if (regex === undefined) {
        return yield* Tool.ToolError.recoverable(`pattern "${input.pattern}" is not a valid glob: a "[" or "{" is not closed`)
      }
      const byName = !input.pattern.includes("/")
      const resolved = yield* workspace.resolve(path)
      const prefix = resolved.relative === "." ? "" : `${resolved.relative}/`
      const files: Array<string> = []
      let truncated = false
      let visited = 0
      yield* Walk.walk(workspace, resolved.relative, Number.MAX_SAFE_INTEGER, ({ entry, path: found }) =>
        Effect.sync(() => {
          if (++visited > maxVisited) {
            truncated = true
            return false
          }
          if (entry.type !== "file") return true
          const subject = byName ? entry.name : found.slice(prefix.length)
          if (!regex.test(subject)) return true
          if (files.length >= config.maxEntries) {
            truncated = true
            return false
          }
          files.push(found)
          return true
        }))
      return { pattern: input.pattern, path, files, truncated }
    }).pipe(Effect.mapError(Errors.toToolError))
})
