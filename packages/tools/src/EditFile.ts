/**
 * `edit_file {path, old_text, new_text, replace_all?, expected_sha256?, allow_placeholder?}`:
 * replace exact text in an existing file, atomically. `old_text` must occur exactly once, or at
 * least once with `replace_all`. Like any overwrite, the edit needs `expected_sha256` equal to
 * the file's current sha256 (from `read_file`, or the `sha256` of the previous write or edit).
 * Placeholder lines in `new_text` that `old_text` did not have are refused unless
 * `allow_placeholder`. The deletion an edit makes is explicit, so no shrink rule applies.
 */
import { Tool } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import * as Errors from "./internal/errors.js"
import * as Text from "./internal/text.js"
import { checkPlaceholders, checkPrecondition, Sha256, UnsafeWrite } from "./WriteFile.js"
import { FileNotFound, Workspace } from "./Workspace.js"

/** `old_text` does not occur, or occurs more than once without `replace_all`. */
export class NoUniqueMatch extends Schema.TaggedError<NoUniqueMatch>()("NoUniqueMatch", {
  path: Schema.String,
  occurrences: Schema.Int
}) {
  override get message() {
    return this.occurrences === 0
      ? `old_text does not occur in "${this.path}"; it must match exactly, whitespace and indentation included (read_file shows the current text)`
      : `old_text occurs ${this.occurrences} times in "${this.path}"; include more surrounding lines so it occurs once, or set replace_all: true`
  }
}

export const Input = Schema.Struct({
  path: Schema.String.annotations({ description: "File path, relative to the workspace root." }),
  old_text: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "Exact text to replace." }),
  new_text: Schema.String.annotations({ description: "Text to put in its place." }),
  replace_all: Schema.optional(Schema.Boolean).annotations({ description: "Replace every occurrence. Default false." }),
  expected_sha256: Schema.optional(Sha256),
  allow_placeholder: Schema.optional(Schema.Boolean).annotations({
    description: "Write even though new_text has placeholder lines such as \"... rest of the code unchanged\"."
  })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  path: Schema.String,
  resolved_path: Schema.String,
  /** Occurrences replaced. */
  replacements: Schema.Int,
  /** sha256 of the new content: the `expected_sha256` of the next edit. */
  sha256: Schema.String,
  previous_sha256: Schema.String,
  bytes: Schema.Int
})
export type Output = typeof Output.Type

const occurrences = (text: string, search: string): number => {
  let count = 0
  for (let at = text.indexOf(search); at !== -1; at = text.indexOf(search, at + search.length)) count++
  return count
}

export const tool = Tool.make({
  name: "edit_file",
  description:
    "Replace exact text in an existing file, atomically. old_text must occur exactly once (or set replace_all). Pass expected_sha256, the file's sha256 from read_file or from the previous write or edit.",
  input: Input,
  output: Output,
  idempotent: false,
  execute: (input) =>
    Effect.gen(function*() {
      const workspace = yield* Workspace
      let replacements = 0
      let previousSha = ""
      const written = yield* workspace.write(input.path, (current) =>
        Effect.gen(function*() {
          if (Option.isNone(current)) return yield* new FileNotFound({ path: input.path })
          yield* checkPrecondition(input.path, current, input.expected_sha256, "edit")
          if (Text.isBinary(current.value.bytes)) {
            return yield* new UnsafeWrite({ path: input.path, reason: "the file is binary; edit_file changes text files only" })
          }
          if (input.old_text === input.new_text) {
            return yield* new UnsafeWrite({ path: input.path, reason: "old_text and new_text are the same; nothing would change" })
          }
          const text = Text.decodeLenient(current.value.bytes)
          const count = occurrences(text, input.old_text)
          if (count === 0 || (count > 1 && input.replace_all !== true)) {
            return yield* new NoUniqueMatch({ path: input.path, occurrences: count })
          }
          yield* checkPlaceholders(input.path, input.old_text, input.new_text, input.allow_placeholder)
          replacements = count
          previousSha = current.value.sha256
          // split/join: no `$` patterns, unlike String.replace.
          return Text.utf8(text.split(input.old_text).join(input.new_text))
        }))
      return {
        path: input.path,
        resolved_path: written.resolved.absolute,
        replacements,
        sha256: written.sha256,
        previous_sha256: previousSha,
        bytes: written.bytes
      }
    }).pipe(
      Effect.catchTags({
        UnsafeWrite: (error) => Effect.fail(Errors.recoverable(error)),
        NoUniqueMatch: (error) => Effect.fail(Errors.recoverable(error))
      }),
      Effect.mapError(Errors.toToolError)
    )
})
