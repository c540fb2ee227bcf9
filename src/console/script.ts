// The console's one inline script: the admin token kept from the URL's fragment (never sent in a URL), forms
// sent as JSON with `Authorization: Bearer <token>` as the admin routes want it, JSON inputs checked before they
// leave, and the live parts of the page refreshed every second without closing what the user opened.
export const CONSOLE_SCRIPT = String.raw`
(() => {
  const KEY = 'df-console-token';
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has('token')) {
    sessionStorage.setItem(KEY, hash.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }
  const headers = () => {
    const token = sessionStorage.getItem(KEY);
    return token ? { 'content-type': 'application/json', authorization: 'Bearer ' + token } : { 'content-type': 'application/json' };
  };
  const show = (form, message) => {
    const out = form.querySelector('.form-error');
    if (out) out.textContent = message;
  };
  const bodyOf = (form) => {
    const body = {};
    for (const field of form.elements) {
      if (!field.name) continue;
      if (field.type === 'checkbox') body[field.name] = field.checked;
      else if (field.dataset.json !== undefined) {
        let value;
        try {
          value = JSON.parse(field.value.trim() === '' ? '{}' : field.value);
        } catch (error) {
          throw new Error('The ' + field.name + ' is not valid JSON: ' + error.message);
        }
        if (typeof value !== 'object' || value === null || Array.isArray(value)) {
          throw new Error('The ' + field.name + ' must be a JSON object such as {"name": "Ada"}.');
        }
        body[field.name] = value;
      } else if (field.value !== '' || field.dataset.keepEmpty !== undefined) body[field.name] = field.value;
    }
    return body;
  };
  document.addEventListener('submit', async (event) => {
    const form = event.target;
    if (!form.dataset.method) return;
    event.preventDefault();
    show(form, '');
    let body;
    try {
      body = bodyOf(form);
    } catch (error) {
      show(form, error.message);
      return;
    }
    const answer = await fetch(form.dataset.url, {
      method: form.dataset.method,
      headers: headers(),
      body: form.dataset.method === 'DELETE' ? undefined : JSON.stringify(body),
    }).catch((error) => ({ ok: false, status: 0, text: async () => String(error) }));
    if (answer.ok) {
      location.reload();
      return;
    }
    const text = await answer.text();
    let message = text;
    try {
      message = JSON.parse(text).message ?? text;
    } catch {}
    if (answer.status === 401) {
      message = 'This console needs the admin token: open the console URL that df-worker printed (it ends in #token=...). ' + message;
    }
    show(form, 'Refused (' + answer.status + '): ' + message);
  });
  const live = document.querySelectorAll('[data-live]');
  if (live.length === 0) return;
  setInterval(async () => {
    const answer = await fetch(location.pathname + location.search).catch(() => undefined);
    if (!answer || !answer.ok) return;
    const next = new DOMParser().parseFromString(await answer.text(), 'text/html');
    for (const region of document.querySelectorAll('[data-live]')) {
      const fresh = next.getElementById(region.id);
      if (!fresh) continue;
      const open = new Set([...region.querySelectorAll('details[open]')].map((d) => d.id));
      region.replaceChildren(...fresh.childNodes);
      for (const id of open) document.getElementById(id)?.setAttribute('open', '');
    }
  }, 1000);
})();
`;
