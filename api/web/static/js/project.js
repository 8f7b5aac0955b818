// A project's page: drawn by the service; its launch form is sent as JSON (lib/forms.js).

import "./lib/forms.js";
