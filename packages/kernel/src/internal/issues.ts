/**
 * A Schema decoding error as short lines, one per problem: `limit: expected an integer >= 1,
 * got 0`, `missing field "path"`, `unexpected field "foo"`. The issues are those
 * `ParseResult.ArrayFormatter` lists (a path and what is wrong there); the expected type is
 * described from the Schema's AST rather than printed as a type, and the noise of optional
 * fields (`| undefined`) and of unions (one line per member) is folded into one line.
 */
import { Either, Option, ParseResult, SchemaAST as AST } from "effect"

type Path = ReadonlyArray<PropertyKey>

interface Problem {
  readonly path: Path
  readonly text: string
}

/** Problems listed at most; the rest are counted. */
const maxProblems = 10

/** The problems of an error, one short line each, without repeats. */
export const lines = (error: ParseResult.ParseError | ParseResult.ParseIssue): ReadonlyArray<string> => {
  const out: Array<Problem> = []
  walk(ParseResult.isParseError(error) ? error.issue : error, [], out)
  const texts = [...new Set(out.map(({ path, text }) => (path.length === 0 ? text : `${pathText(path)}: ${text}`)))]
  return texts.length <= maxProblems ? texts : [...texts.slice(0, maxProblems), `and ${texts.length - maxProblems} more problems`]
}

/** The problems of an error on one line, joined with "; ". */
export const format = (error: ParseResult.ParseError | ParseResult.ParseIssue): string => lines(error).join("; ")

const toArray = <A>(value: A | ReadonlyArray<A>): ReadonlyArray<A> => (Array.isArray(value) ? value : [value as A])

const walk = (issue: ParseResult.ParseIssue, path: Path, out: Array<Problem>): void => {
  switch (issue._tag) {
    case "Pointer":
      return walk(issue.issue, [...path, ...toArray(issue.path)], out)
    case "Composite":
      if (AST.isUnion(issue.ast)) return union(issue, path, out)
      for (const inner of toArray(issue.issues)) walk(inner, path, out)
      return
    case "Missing":
    case "Unexpected": {
      const key = path[path.length - 1]
      const parent = path.slice(0, -1)
      const what = typeof key === "number" ? `item ${key}` : `field ${JSON.stringify(String(key))}`
      if (issue._tag === "Missing" && issue.message !== undefined) return void out.push({ path, text: issue.message })
      return void out.push({ path: parent, text: `${issue._tag === "Missing" ? "missing" : "unexpected"} ${what}` })
    }
    case "Transformation":
      return walk(issue.issue, path, out)
    case "Refinement":
      if (issue.kind === "From" && !shallow(issue.issue)) return walk(issue.issue, path, out)
      return leaf(issue, path, out)
    case "Type":
    case "Forbidden":
      return leaf(issue, path, out)
  }
}

/** An issue about the value itself (its type or a constraint on it), not about something inside it. */
const shallow = (issue: ParseResult.ParseIssue): boolean =>
  issue._tag === "Type" || (issue._tag === "Refinement" && (issue.kind === "Predicate" || shallow(issue.issue)))

/** The Schema's author worded this problem (a `message` annotation, a filter returning a string). */
const custom = (issue: ParseResult.ParseIssue): boolean => {
  switch (issue._tag) {
    case "Type":
    case "Forbidden":
      return issue.message !== undefined || Option.isSome(AST.getMessageAnnotation(issue.ast))
    case "Refinement":
      return Option.isSome(AST.getMessageAnnotation(issue.ast)) || custom(issue.issue)
    default:
      return false
  }
}

const leaf = (issue: ParseResult.Type | ParseResult.Forbidden | ParseResult.Refinement, path: Path, out: Array<Problem>): void => {
  const expected = custom(issue) || issue._tag === "Forbidden" ? undefined : describe(issue.ast)
  if (expected !== undefined) return void out.push({ path, text: `expected ${expected}, got ${show(issue.actual)}` })
  for (const { message, path: inner } of ParseResult.ArrayFormatter.formatIssueSync(issue)) {
    out.push({ path: [...path, ...inner], text: reword(message) })
  }
}

/** Effect's default wording, `Expected X, actual Y`, in this module's. */
const reword = (message: string): string => {
  const match = /^Expected ([\s\S]*), actual ([\s\S]*)$/.exec(message)
  const text = match === null ? message : `expected ${match[1]}, got ${match[2]}`
  return cap(text.replace(/\s+/g, " "), 200)
}

/**
 * A value matching none of a union's members. When every member rejects it outright, one line
 * lists what would do; when some member got further (an object of the right shape), its problems.
 */
const union = (issue: ParseResult.Composite, path: Path, out: Array<Problem>): void => {
  const all = toArray(issue.issues)
  const optional = all.filter((m) => !(m._tag === "Type" && AST.isUndefinedKeyword(m.ast)))
  const members = optional.length > 0 ? optional : all
  const deep = members.filter((m) => !shallow(m))
  if (deep.length > 0) {
    for (const member of deep) walk(member, path, out)
    return
  }
  const expected = members.map((m) => (custom(m) || (m._tag !== "Type" && m._tag !== "Refinement") ? undefined : describe(m.ast)))
  if (expected.some((e) => e === undefined)) {
    for (const member of members) walk(member, path, out)
    return
  }
  out.push({ path, text: `expected ${alternatives(expected.filter((e): e is string => e !== undefined))}, got ${show(issue.actual)}` })
}

const alternatives = (items: ReadonlyArray<string>): string => {
  const unique = [...new Set(items)]
  const shown = unique.length > 8 ? [...unique.slice(0, 8), "..."] : unique
  if (shown.length <= 2) return shown.join(" or ")
  return `one of ${shown.join(", ")}`
}

/** What a Schema accepts, in a few words; `undefined` when it cannot be said better than Effect does. */
const describe = (ast: AST.AST): string | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return "a string"
    case "NumberKeyword":
      return "a number"
    case "BooleanKeyword":
      return "a boolean"
    case "BigIntKeyword":
      return "a bigint"
    case "UndefinedKeyword":
    case "VoidKeyword":
    case "NeverKeyword":
      return "nothing"
    case "UnknownKeyword":
    case "AnyKeyword":
      return "any value"
    case "ObjectKeyword":
    case "TypeLiteral":
      return "an object"
    case "SymbolKeyword":
    case "UniqueSymbol":
      return "a symbol"
    case "Literal":
      return ast.literal === null ? "null" : JSON.stringify(typeof ast.literal === "bigint" ? String(ast.literal) : ast.literal)
    case "Enums":
      return alternatives(ast.enums.map(([, value]) => JSON.stringify(value)))
    case "TemplateLiteral":
      return "a string of a set form"
    case "TupleType":
      return ast.elements.length === 0 ? "an array" : `an array of ${ast.elements.length} items`
    case "Union": {
      const members = ast.types.filter((m) => !AST.isUndefinedKeyword(m))
      const described = members.map(describe)
      if (members.length === 0) return "nothing"
      return described.some((d) => d === undefined) ? undefined : alternatives(described.filter((d): d is string => d !== undefined))
    }
    case "Refinement":
      // A filter this module does not know is named by its annotations, as Effect names it.
      return refinement(ast) ?? named(ast) ?? `${describe(ast.from) ?? "a value"} that passes a check`
    case "Transformation":
      return describe(ast.from)
    case "Suspend":
      return describe(ast.f())
    case "Declaration":
      return Option.getOrUndefined(AST.getDescriptionAnnotation(ast))
  }
}

const named = (ast: AST.Annotated): string | undefined =>
  AST.getDescriptionAnnotation(ast).pipe(
    Option.orElse(() => AST.getTitleAnnotation(ast)),
    Option.orElse(() => AST.getIdentifierAnnotation(ast)),
    Option.getOrUndefined
  )

/** Constraints Effect's filters declare in their JSON Schema annotation, gathered from a chain of refinements. */
interface Constraints {
  integer: boolean
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  exclusiveMaximum?: number
  minLength?: number
  maxLength?: number
  minItems?: number
  maxItems?: number
  readonly others: Array<string>
}

const numeric = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems"] as const
const tighter = { minimum: Math.max, exclusiveMinimum: Math.max, minLength: Math.max, minItems: Math.max, maximum: Math.min, exclusiveMaximum: Math.min, maxLength: Math.min, maxItems: Math.min }

const refinement = (outer: AST.Refinement): string | undefined => {
  const chain: Array<AST.Refinement> = []
  let base: AST.AST = outer
  while (AST.isRefinement(base)) {
    chain.unshift(base)
    base = base.from
  }
  const c: Constraints = { integer: false, others: [] }
  for (const r of chain) {
    const annotation: unknown = Option.getOrUndefined(AST.getJSONSchemaAnnotation(r))
    const js: Record<string, unknown> = typeof annotation === "object" && annotation !== null ? { ...annotation } : {}
    const description = Option.getOrUndefined(AST.getDescriptionAnnotation(r))
    let known = false
    if (js["type"] === "integer") {
      c.integer = true
      known = true
    }
    for (const key of numeric) {
      const value = js[key]
      if (typeof value !== "number") continue
      const current = c[key]
      c[key] = current === undefined ? value : tighter[key](current, value)
      known = true
    }
    if (typeof js["multipleOf"] === "number") {
      c.others.push(`divisible by ${js["multipleOf"]}`)
      known = true
    }
    if (typeof js["pattern"] === "string") {
      // Effect's own description says it better than the pattern when it has one ("with no leading or trailing whitespace").
      const said = description?.startsWith("a string ") === true && !description.startsWith("a string matching the pattern")
      c.others.push(said && description !== undefined ? description.slice("a string ".length) : `matching ${js["pattern"]}`)
      known = true
    }
    if (!known) return undefined
  }
  return [noun(base, c), ...bounds(c)].join(" ")
}

const noun = (base: AST.AST, c: Constraints): string => {
  const nonEmpty = (c.minLength === 1 && c.maxLength === undefined) || (c.minItems === 1 && c.maxItems === undefined)
  if (base._tag === "NumberKeyword") return c.integer ? "an integer" : "a number"
  if (base._tag === "StringKeyword") return nonEmpty ? "a non-empty string" : "a string"
  if (base._tag === "TupleType" && base.elements.length === 0) return nonEmpty ? "a non-empty array" : "an array"
  return describe(base) ?? "a value"
}

const bounds = (c: Constraints): ReadonlyArray<string> => {
  const parts: Array<string> = []
  let min = c.minimum
  let max = c.maximum
  // For integers, `> 0` reads better as `>= 1`.
  if (c.exclusiveMinimum !== undefined) {
    if (c.integer && Number.isInteger(c.exclusiveMinimum)) min = Math.max(min ?? -Infinity, c.exclusiveMinimum + 1)
    else parts.push(`> ${c.exclusiveMinimum}`)
  }
  if (c.exclusiveMaximum !== undefined) {
    if (c.integer && Number.isInteger(c.exclusiveMaximum)) max = Math.min(max ?? Infinity, c.exclusiveMaximum - 1)
    else parts.push(`< ${c.exclusiveMaximum}`)
  }
  if (min !== undefined && max !== undefined) parts.unshift(`between ${min} and ${max}`)
  else if (min !== undefined) parts.unshift(`>= ${min}`)
  else if (max !== undefined) parts.unshift(`<= ${max}`)
  const length = range("characters", c.minLength, c.maxLength)
  if (length !== undefined) parts.push(length)
  const items = range("items", c.minItems, c.maxItems)
  if (items !== undefined) parts.push(items)
  return parts.concat(c.others).map((part, i) => (i === 0 ? part : `and ${part}`))
}

/** A length range; a lone minimum of 1 is already said by the noun ("a non-empty string"). */
const range = (unit: string, low: number | undefined, high: number | undefined): string | undefined => {
  if (low !== undefined && low > 0 && high !== undefined) return low === high ? `of exactly ${high} ${unit}` : `of ${low} to ${high} ${unit}`
  if (low !== undefined && low > 1) return `of at least ${low} ${unit}`
  if (high !== undefined) return `of at most ${high} ${unit}`
  return undefined
}

/** A value as a short text: JSON when short, its kind and size otherwise. */
const show = (value: unknown): string => {
  if (value === undefined) return "nothing"
  if (typeof value === "string") return value.length <= 60 ? JSON.stringify(value) : `a string of ${value.length} characters`
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value === null) return String(value)
  if (Array.isArray(value)) {
    const json = safeJson(value)
    return json !== undefined && json.length <= 60 ? json : `an array of ${value.length} items`
  }
  if (typeof value === "object") {
    const json = safeJson(value)
    return json !== undefined && json.length <= 60 ? json : "an object"
  }
  return typeof value
}

const safeJson = (value: unknown): string | undefined =>
  Either.getOrUndefined(Either.try((): string | undefined => JSON.stringify(value)))

const cap = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 3)}...`)

const identifier = /^[A-Za-z_$][\w$]*$/

/** `tags[0].name`, as a JavaScript reader would write it. */
const pathText = (path: Path): string =>
  path.map((key, i) =>
    typeof key === "number"
      ? `[${key}]`
      : typeof key === "string" && identifier.test(key)
      ? (i === 0 ? key : `.${key}`)
      : `[${JSON.stringify(String(key))}]`
  ).join("")
