/**
 * A JSON document written one way whatever the order its members came in:
 * members sorted by name at every level (by UTF-16 code units, as RFC 8785
 * sorts them), no white space, numbers and strings as `JSON.stringify`
 * writes the parsed values (RFC 8785 writes numbers that way too). Two
 * documents that differ only in member order or spacing have one canonical
 * form, so a retry whose client serialized it anew is still the same payment
 * (docs/idempotency.md, the key and the fingerprint).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  // One string grown in place: a payment is fingerprinted on every request (docs/performance.md).
  if (Array.isArray(value)) {
    let text = '['
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonicalJson(value[i])
    return text + ']'
  }
  const members = value as Record<string, unknown>
  const names = Object.keys(members).sort()
  let text = '{'
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string
    text += (i === 0 ? '' : ',') + JSON.stringify(name) + ':' + canonicalJson(members[name])
  }
  return text + '}'
}
