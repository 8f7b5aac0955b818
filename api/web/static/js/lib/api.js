// The page's config and its calls to the service: same endpoints, same identity as any
// API client (the edge proxy adds the claim headers to every request of the page).

export const config = JSON.parse(document.getElementById("page-config").textContent);

/** A path with its query; the page's own tenant_id rides along when it was given. */
export function url(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  if (config.tenant_query) query.set("tenant_id", config.tenant_query);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** An answer that was not 2xx, with the service's error body. */
export class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
  }
}

/** "404 run_not_found: No run with id …" from a C3 body, or the 422 items. */
export function describe(status, body) {
  if (body && typeof body === "object") {
    if (Array.isArray(body.detail)) {
      const items = body.detail.map((item) => `${(item.loc || []).join(".")}: ${item.msg}`);
      return `${status} request_invalid: ${items.join("; ")}`;
    }
    if (body.code) return `${status} ${body.code}: ${body.detail}`;
  }
  return `${status}: ${typeof body === "string" ? body : JSON.stringify(body)}`;
}

async function bodyOf(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** GET a JSON endpoint; throws ApiError with the error body when not 2xx. */
export async function getJSON(path, params = {}, { headers = {}, signal } = {}) {
  const response = await fetch(url(path, params), {
    headers: { accept: "application/json", ...headers },
    signal,
    cache: "no-store",
  });
  const body = await bodyOf(response);
  if (!response.ok) throw new ApiError(response.status, body);
  return { body, headers: response.headers, status: response.status };
}

/** POST a JSON body; answers {status, body} whatever the status (the page shows both). */
export async function postJSON(path, data) {
  const response = await fetch(url(path), {
    method: "POST",
    headers: { accept: "application/json", "content-type": "application/json" },
    body: JSON.stringify(data),
    cache: "no-store",
  });
  return { status: response.status, body: await bodyOf(response) };
}
