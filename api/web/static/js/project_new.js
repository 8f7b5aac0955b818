// The project factory page: its form is sent to the project factory's own endpoint
// (lib/forms.js), whose 422 items appear beside their fields; a created project opens.

import "./lib/forms.js";
