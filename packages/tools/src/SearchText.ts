/**
 * `search_text {pattern, path?}`: lines matching a JavaScript regular expression, in a file or
 * in the files below a directory (default the workspace root). Binary files and files larger
 * than `searchMaxFileBytes` (default 1 MiB) are skipped and counted; `.git` and `node_modules`
 * are not entered. At most `maxMatches` matches (default 200), each line cut to 300 characters.
 */
import { Tool } from "@rx/kernel"
import { Effect, Schema } from "effect"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Files from "./internal/files.js"
import * as Text from "./internal/text.js"
import * as Walk from "./internal/walk.js"
import { failure, Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  pattern: Schema.String.pipe(Schema.minLength(1)).annotations({
    description: "JavaScript regular expression, matched against each line."
  }),
  path: Schema.optional(Schema.String).annotations({
    description: "File or directory to search, relative to the workspace root. Default: the root."
  })
})
export type Input = typeof Input.Type

export const Match = Schema.Struct({
  /** Relative to the workspace root. */
  path: Schema.String,
  /** 1-based line number. */
  line: Schema.Int,
  /** The line, cut to 300 characters. */
  text: Schema.String
})

export const Output = Schema.Struct({
  pattern: Schema.String,
  path: Schema.String,
  matches: Schema.Array(Match),
  files_searched: Schema.Int,
  /** Binary or too large files not searched. */
  files_skipped: Schema.Int,
  /** True when there are more matches than were returned. */
  truncated: Schema.Boolean
})
export type Output = typeof Output.Type

const maxLineChars = 300
const maxVisited = 200_000

export const tool = Tool.make({
  name: "search_text",
  description:
    "Search files of the workspace for lines matching a JavaScript regular expression. `path` is a file or a directory (default the root). Returns path, line number and text of each match.",
  input: Input,
  output: Output,
  idempotent: true,
  execute: (input) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const path = input.path ?? "."
      const regex = yield* Effect.try({
        try: () => new RegExp(input.pattern),
        catch: (error) =>
          Tool.ToolError.recoverable(
            `pattern is not a valid regular expression: ${error instanceof Error ? error.message : String(error)}`
          )
      })
      const resolved = yield* workspace.resolve(path)
      const matches: Array<typeof Match.Type> = []
      let searched = 0
      let skipped = 0
      let truncated = false
      let visited = 0

      const searchFile = (file: string) =>
        Effect.scoped(Effect.gen(function*() {
          const opened = yield* workspace.open(file)
          if (Number(opened.info.size) > config.searchMaxFileBytes) {
            skipped++
            return true
          }
          const bytes = yield* Files.readAll(opened.file).pipe(Effect.mapError(failure(file, "read")))
          if (Text.isBinary(bytes)) {
            skipped++
            return true
          }
          searched++
          const lines = Text.decodeLenient(bytes).split("\n")
          for (let i = 0; i < lines.length; i++) {
            const line = lines[i] ?? ""
            if (!regex.test(line)) continue
            if (matches.length >= config.maxMatches) {
              truncated = true
              return false
            }
            matches.push({ path: opened.resolved.relative, line: i + 1, text: line.slice(0, maxLineChars) })
          }
          return true
        }))

      if (resolved.type === "file") {
        yield* searchFile(path)
      } else {
        yield* Walk.walk(workspace, resolved.relative, Number.MAX_SAFE_INTEGER, ({ entry, path: found }) => {
          if (++visited > maxVisited) {
            truncated = true
            return Effect.succeed(false)
          }
          return entry.type === "file" ? searchFile(found) : Effect.succeed(true)
        })
      }
      return { pattern: input.pattern, path, matches, files_searched: searched, files_skipped: skipped, truncated }
    }).pipe(Effect.mapError(Errors.toToolError))
})
