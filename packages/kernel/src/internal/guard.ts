/**
 * A fast validating predicate compiled from a Schema's AST, for schemas whose decoded and
 * encoded forms coincide (plain JSON shapes: structs, literals, arrays, records, refinements).
 * It accepts exactly the values the Schema's type accepts with no excess properties, so an
 * accepted value can be used as is; anything else goes to the Schema for its verdict and message.
 * `undefined` when the AST holds something this does not handle (then always use the Schema).
 */
import { Option, SchemaAST as AST } from "effect"

type Guard = (u: unknown) => boolean

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export const compile = (ast: AST.AST): Guard | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return (u) => typeof u === "string"
    case "NumberKeyword":
      return (u) => typeof u === "number"
    case "BooleanKeyword":
      return (u) => typeof u === "boolean"
    case "UnknownKeyword":
    case "AnyKeyword":
      return () => true
    case "UndefinedKeyword":
      return (u) => u === undefined
    case "Literal": {
      const literal = ast.literal
      return (u) => u === literal
    }
    case "Refinement": {
      const from = compile(ast.from)
      if (from === undefined) return undefined
      return (u) => from(u) && Option.isNone(ast.filter(u, {}, ast))
    }
    case "TupleType": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const rest = ast.rest[0]
      const item = rest === undefined ? undefined : compile(rest.type)
      if (item === undefined) return undefined
      return (u) => Array.isArray(u) && u.every(item)
    }
    case "TypeLiteral":
      return typeLiteral(ast)
    case "Union":
      return union(ast)
    default:
      return undefined
  }
}

const typeLiteral = (ast: AST.TypeLiteral): Guard | undefined => {
  const properties: Array<{ readonly name: string; readonly optional: boolean; readonly guard: Guard }> = []
  for (const p of ast.propertySignatures) {
    const guard = compile(p.type)
    if (guard === undefined || typeof p.name !== "string") return undefined
    properties.push({ name: p.name, optional: p.isOptional, guard })
  }
  const index = ast.indexSignatures[0]
  if (ast.indexSignatures.length > 1 || (index !== undefined && index.parameter._tag !== "StringKeyword")) return undefined
  const value = index === undefined ? undefined : compile(index.type)
  if (index !== undefined && value === undefined) return undefined
  const known = new Set(properties.map((p) => p.name))
  return (u) => {
    if (!isRecord(u)) return false
    let present = 0
    for (const p of properties) {
      const v = u[p.name]
      if (v === undefined && !Object.hasOwn(u, p.name)) {
        if (p.optional) continue
        return false
      }
      if (!p.guard(v)) return false
      present++
    }
    if (value === undefined) {
      // Excess properties: the Schema would drop them, so leave such values to the Schema.
      return Object.keys(u).length === present
    }
    for (const key in u) {
      if (!known.has(key) && !value(u[key])) return false
    }
    return true
  }
}

const union = (ast: AST.Union): Guard | undefined => {
  const members: Array<Guard> = []
  for (const member of ast.types) {
    const guard = compile(member)
    if (guard === undefined) return undefined
    members.push(guard)
  }
  // A tagged union: go straight to the member with the value's `_tag`.
  const byTag = new Map<unknown, Guard>()
  ast.types.forEach((member, i) => {
    const tag = member._tag === "TypeLiteral" ? member.propertySignatures.find((p) => p.name === "_tag") : undefined
    const guard = members[i]
    if (tag?.type._tag === "Literal" && guard !== undefined) byTag.set(tag.type.literal, guard)
  })
  if (byTag.size === members.length) {
    return (u) => isRecord(u) && (byTag.get(u["_tag"])?.(u) ?? false)
  }
  return (u) => members.some((guard) => guard(u))
}

/**
 * A copy of a value the guard of `ast` accepts, built as decoding builds it: a struct's keys in
 * the Schema's order, then those of its index signature in the value's; structs, records and
 * arrays made anew; anything else as it is. `undefined` where `compile` is.
 */
export const copier = (ast: AST.AST): ((u: unknown) => unknown) | undefined => {
  switch (ast._tag) {
    case "Refinement":
      return copier(ast.from)
    case "TupleType": {
      const rest = ast.rest[0]
      const item = rest === undefined || ast.elements.length > 0 ? undefined : copier(rest.type)
      return item === undefined ? undefined : (u) => (u as ReadonlyArray<unknown>).map((v) => item(v))
    }
    case "TypeLiteral": {
      const properties: Array<readonly [string, (u: unknown) => unknown]> = []
      for (const p of ast.propertySignatures) {
        const copy = copier(p.type)
        if (copy === undefined || typeof p.name !== "string") return undefined
        properties.push([p.name, copy])
      }
      const index = ast.indexSignatures[0]
      const value = index === undefined ? undefined : copier(index.type)
      if (index !== undefined && value === undefined) return undefined
      const known = new Set(properties.map(([name]) => name))
      return (u) => {
        const from = u as Record<string, unknown>
        const to: Record<string, unknown> = {}
        for (const [name, copy] of properties) if (Object.hasOwn(from, name)) to[name] = copy(from[name])
        if (value !== undefined) for (const key of Object.keys(from)) if (!known.has(key)) to[key] = value(from[key])
        return to
      }
    }
    case "Union": {
      const members: Array<readonly [Guard, (u: unknown) => unknown]> = []
      for (const member of ast.types) {
        const guard = compile(member)
        const copy = copier(member)
        if (guard === undefined || copy === undefined) return undefined
        members.push([guard, copy])
      }
      return (u) => {
        for (const [guard, copy] of members) if (guard(u)) return copy(u)
        return u
      }
    }
    default:
      return compile(ast) === undefined ? undefined : (u) => u
  }
}
