/**
 * `search_text {pattern, path?}`: lines matching a regular expression in RE2 syntax, in a file or
 * in the files below a directory (default the workspace root). Binary files and files larger
 * than `searchMaxFileBytes` (default 1 MiB) are skipped and counted, as are files that cannot be
 * opened during a directory search (they changed, or are not regular files); `.git` and
 * `node_modules` are not entered. At most `maxMatches` matches (default 200), each line cut to
 * 300 characters.
 *
 * The expression runs on RE2JS, whose matching takes time linear in the line: no pattern can
 * backtrack without end. RE2 has no backreferences and no lookaround; a pattern using them is
 * refused with a message saying so. The search yields between files and every few thousand
 * lines, so interrupting it lands at once, and it stops after `searchTimeoutMs` (default 10 s)
 * with what it found, flagged `timed_out`.
 */
import { Tool } from "@rx/kernel"
import { Clock, Effect, Either, Schema } from "effect"
import { RE2JS } from "re2js"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Files from "./internal/files.js"
import { readOnly } from "./internal/readOnly.js"
import * as Text from "./internal/text.js"
import * as Walk from "./internal/walk.js"
import { failure, Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  pattern: Schema.String.pipe(Schema.minLength(1)).annotations({
    description:
      "Regular expression in RE2 syntax (like JavaScript's, without backreferences such as \\1 and without lookahead or lookbehind), matched against each line. (?i) at the start ignores case."
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
  /** Binary, too large or unreadable files not searched. */
  files_skipped: Schema.Int,
  /** True when there may be more matches than were returned (the match cap, or the time budget). */
  truncated: Schema.Boolean,
  /** True when the search stopped at `searchTimeoutMs`; `matches` holds what was found until then. */
  timed_out: Schema.Boolean
})
export type Output = typeof Output.Type

const maxLineChars = 300
const maxVisited = 200_000
/** Lines matched between two yields (and two looks at the clock). */
const linesPerYield = 2_000

/** What RE2 cannot do, named for the model, from the parser's message. */
const unsupported = (pattern: string, message: string): string => {
  if (/\(\?<?[=!]/.test(pattern)) return "lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported in RE2 syntax"
  if (/\\[1-9]|\\k</.test(pattern)) return "backreferences (\\1, \\k<name>) are not supported in RE2 syntax"
  if (/\(\?>/.test(pattern)) return "atomic groups ((?>) are not supported in RE2 syntax"
  if (/nested repetition/.test(message)) return "possessive quantifiers (a++, a*+) are not supported in RE2 syntax"
  return "RE2 syntax is like JavaScript's without backreferences and lookaround; write \\x{41} for \\u0041"
}

/** Compile `pattern` as RE2, or say why it cannot be. */
export const compile = (pattern: string): Either.Either<RE2JS, string> => {
  try {
    return Either.right(RE2JS.compile(pattern))
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    return Either.left(`pattern is not a valid RE2 regular expression: ${message} (${unsupported(pattern, message)})`)
  }
}

export const tool = Tool.make({
  name: "search_text",
  description:
    "Search files of the workspace for lines matching a regular expression in RE2 syntax (no backreferences, no lookahead or lookbehind; matching takes linear time). `path` is a file or a directory (default the root). Returns path, line number and text of each match.",
  input: Input,
  output: Output,
  ...readOnly,
  execute: (input) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const path = input.path ?? "."
      const regex = yield* Either.match(compile(input.pattern), {
        onLeft: (message) => Effect.fail(Tool.ToolError.recoverable(message)),
        onRight: Effect.succeed
      })
      const resolved = yield* workspace.resolve(path)
      const deadline = (yield* Clock.currentTimeMillis) + config.searchTimeoutMs
      const matches: Array<typeof Match.Type> = []
      let searched = 0
      let skipped = 0
      let truncated = false
      let timedOut = false
      let visited = 0

      /** Yield to other fibers (interruption lands here); false once the time budget is spent. */
      const pause = Effect.gen(function*() {
        yield* Effect.yieldNow()
        if ((yield* Clock.currentTimeMillis) < deadline) return true
        timedOut = true
        truncated = true
        return false
      })

      /** Search one file; false to stop the whole search. */
      const searchFile = (file: string) =>
        Effect.scoped(Effect.gen(function*() {
          if (!(yield* pause)) return false
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
            if (i > 0 && i % linesPerYield === 0 && !(yield* pause)) return false
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

      if (resolved.type !== "directory") {
        // A file, or anything else: opening it says what it is.
        yield* searchFile(path)
      } else {
        yield* Walk.walk(workspace, resolved.relative, Number.MAX_SAFE_INTEGER, ({ entry, path: found }) => {
          if (++visited > maxVisited) {
            truncated = true
            return Effect.succeed(false)
          }
          if (entry.type !== "file") return Effect.succeed(true)
          // A file that changed or cannot be opened since it was listed is skipped, not fatal to
          // the search; a failing file system still ends it.
          return searchFile(found).pipe(
            Effect.catchIf(
              Errors.isRecoverable,
              () => Effect.sync(() => {
                skipped++
                return true
              })
            )
          )
        })
      }
      return {
        pattern: input.pattern,
        path,
        matches,
        files_searched: searched,
        files_skipped: skipped,
        truncated,
        timed_out: timedOut
      }
    }).pipe(Effect.mapError(Errors.toToolError))
})
