"""English words for the synthetic histories (see `generate.py` for the slots).

Family "A" is the development set; family "B" is held out: other fact phrasings, other questions,
other small talk, a terser voice. Vocabulary entries carry per-family surface forms: "fact" (how
the conversation says it), "q" (how a long question paraphrases it) and "short" (agent query).
"""

from __future__ import annotations

JOINER = " "

KINDS = {
    "pump": {"": "pump", "a": "a pump"},
    "compressor": {"": "compressor", "a": "a compressor"},
    "chiller": {"": "chiller", "a": "a chiller"},
    "conveyor": {"": "conveyor", "a": "a conveyor"},
    "mixer": {"": "mixer", "a": "a mixer"},
    "fan": {"": "fan", "a": "a fan"},
    "extruder": {"": "extruder", "a": "an extruder"},
    "gearbox": {"": "gearbox", "a": "a gearbox"},
}

_STEMS = (
    "Riverside",
    "Oakfield",
    "Millbrook",
    "Harbor Point",
    "Ashford",
    "Bayview",
    "Cedar Falls",
    "Clearwater",
    "Eastgate",
    "Fairview",
    "Glenwood",
    "Greenfield",
    "Hillcrest",
    "Kingsbridge",
    "Lakeside",
    "Maple Ridge",
    "Northbrook",
    "Pinehurst",
    "Redstone",
    "Stonebridge",
    "Sunnyvale",
    "Westbrook",
    "Willow Creek",
    "Brookdale",
    "Copperhill",
    "Elmhurst",
    "Foxton",
    "Granite Bay",
    "Hawthorne",
    "Ironwood",
    "Juniper Flats",
    "Kestrel Point",
    "Larchmont",
    "Meadowbank",
    "Newhaven",
    "Old Quarry",
    "Pebble Creek",
    "Quarry Hill",
    "Ravensworth",
    "Saltmarsh",
    "Thornbury",
    "Upton",
    "Valley Forge",
    "Whitmore",
    "Yarrow",
    "Alderbrook",
    "Blackwater",
    "Carrow",
    "Dunmore",
    "Edgewater",
    "Fernhill",
    "Gull Harbor",
    "Heathfield",
    "Ivybridge",
    "Lindenfield",
    "Moorside",
    "Norwood",
    "Orchard Park",
    "Portside",
    "Rosewood",
)
_TYPES = ("Plant", "Mill", "Works", "Depot", "Terminal", "Station")


def site_name(code: int) -> str:
    stem = _STEMS[code % len(_STEMS)]
    kind = _TYPES[(code // len(_STEMS)) % len(_TYPES)]
    number = code // (len(_STEMS) * len(_TYPES))
    return f"{stem} {kind}" + (f" {number + 1}" if number else "")


PEOPLE = (
    "Marta",
    "Dev",
    "Priya",
    "Tom",
    "Aisha",
    "Luis",
    "Ken",
    "Sofia",
    "Omar",
    "Grace",
    "Ivan",
    "Hannah",
)
_FIRST = (
    "Rosa",
    "Felix",
    "Nadia",
    "Hugo",
    "Leila",
    "Mateo",
    "Ingrid",
    "Kofi",
    "Yuki",
    "Bram",
    "Elena",
    "Tariq",
    "Maya",
    "Jonas",
    "Amara",
    "Bruno",
    "Chloe",
    "Rafael",
    "Signe",
    "Wei",
    "Zara",
    "Nikolai",
    "Freya",
    "Anton",
    "Lucia",
    "Emeka",
    "Astrid",
    "Diego",
    "Mina",
    "Oskar",
    "Carmen",
    "Idris",
    "Noor",
    "Tobias",
    "Vera",
    "Kenji",
    "Selma",
    "Samir",
    "Ruth",
    "Paolo",
)
_LAST = (
    "Delgado",
    "Moreau",
    "Okafor",
    "Lindqvist",
    "Brennan",
    "Haddad",
    "Novak",
    "Tanaka",
    "Kowalski",
    "Fischer",
    "Mensah",
    "Ortega",
    "Petrov",
    "Quinn",
    "Rahman",
    "Silva",
    "Thorne",
    "Ueda",
    "Varga",
    "Whitfield",
    "Yilmaz",
    "Zhou",
    "Abbott",
    "Castillo",
    "Duarte",
    "Eriksen",
    "Faulkner",
    "Greer",
    "Holm",
    "Iqbal",
    "Jansen",
    "Keller",
    "Lowe",
    "Mbeki",
    "Nash",
    "Olsen",
    "Pryce",
    "Reyes",
    "Strand",
    "Tate",
)


def owner(index: int) -> str:
    """Task owner number `index` (0..799), a full name; distinct indexes, distinct names."""
    first = _FIRST[index % 40]
    last = _LAST[(index // 40 + 3 * (index % 40)) % 40]
    return f"{first} {last}"


def rate(hundredths: int) -> str:
    whole, frac = divmod(hundredths, 100)
    return f"{whole}.{frac // 10}%" if frac % 10 == 0 else f"{whole}.{frac:02d}%"


DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


def modify(text: str, form: str) -> str:
    raise KeyError(f"English has no form {form!r} for {text!r}")


def _v(fa, qa, sa, fb, qb, sb) -> dict:
    return {"A": {"fact": fa, "q": qa, "short": sa}, "B": {"fact": fb, "q": qb, "short": sb}}


# Symptoms: "fact" is a clause ("the seal is leaking"), "q" a noun phrase.
_SYMPTOMS = {
    "vibration": _v(
        [
            "the vibration alarm keeps coming back",
            "the vibration alarm has tripped three times since Monday",
        ],
        ["the recurring vibration alarm", "the vibration alarm that won't stay cleared"],
        ["vibration alarm"],
        [
            "vibration readings keep spiking past the alarm limit",
            "it shakes itself into a vibration trip every few hours",
        ],
        ["the high-vibration trips", "the excessive vibration"],
        ["high vibration"],
    ),
    "seal_leak": _v(
        ["the mechanical seal is leaking again", "there's a steady drip from the shaft seal"],
        ["the seal leak", "the leaking shaft seal"],
        ["seal leak"],
        ["the seal has started weeping", "fluid is seeping past the seal"],
        ["the weeping seal", "the seal seepage"],
        ["leaking seal"],
    ),
    "bearing_hot": _v(
        ["the drive-end bearing is running hot", "the bearing temperature keeps creeping up"],
        ["the overheating bearing", "the hot bearing"],
        ["bearing overheating"],
        ["the bearing housing is too hot to touch", "one bearing runs twenty degrees above normal"],
        ["the bearing running warm", "the bearing temperature problem"],
        ["hot bearing"],
    ),
    "overcurrent": _v(
        [
            "the motor keeps tripping on overcurrent",
            "the breaker trips on overload whenever it ramps up",
        ],
        ["the overcurrent trips", "the motor tripping on overload"],
        ["overcurrent trip"],
        [
            "it draws too much current and the drive cuts out",
            "the motor protection relay keeps kicking it off",
        ],
        ["the motor overload shutdowns", "the current trips"],
        ["motor overload"],
    ),
    "oil_leak": _v(
        ["there's an oil leak under the unit", "oil is dripping onto the floor from the casing"],
        ["the oil leak", "the oil dripping from the casing"],
        ["oil leak"],
        ["a puddle of oil keeps forming underneath", "the oil level drops every shift"],
        ["the oil loss", "the oil puddle under it"],
        ["losing oil"],
    ),
    "startup_noise": _v(
        [
            "it makes a grinding noise at startup",
            "there's a loud grinding sound for the first minute after a start",
        ],
        ["the grinding noise on startup", "the noise when it starts"],
        ["startup noise"],
        ["it screeches every time it starts", "a metallic rattle comes out of it on start"],
        ["the screeching on start", "the rattle at start-up"],
        ["noise on start"],
    ),
    "pressure_drop": _v(
        ["the discharge pressure keeps dropping", "the outlet pressure sags below setpoint"],
        ["the falling discharge pressure", "the pressure drop"],
        ["pressure drop"],
        ["it can't hold pressure anymore", "pressure falls off after about an hour of running"],
        ["the loss of pressure", "the pressure that won't hold"],
        ["low pressure"],
    ),
    "high_temp": _v(
        [
            "the high temperature alarm keeps going off",
            "it throws a high temperature alarm every afternoon",
        ],
        ["the high temperature alarm", "the overtemperature alarm"],
        ["high temp alarm"],
        ["it overheats and alarms under load", "the temperature goes over the limit at full load"],
        ["the overheating", "the over-temperature warnings"],
        ["overheating"],
    ),
    "sensor_drift": _v(
        [
            "the temperature sensor reading is drifting",
            "the sensor reads five degrees off from the handheld",
        ],
        ["the drifting sensor", "the sensor giving wrong readings"],
        ["sensor drift"],
        [
            "the transmitter shows values that wander around",
            "the sensor disagrees with the reference gauge",
        ],
        ["the unreliable sensor readings", "the sensor error"],
        ["bad sensor readings"],
    ),
    "no_restart": _v(
        ["it won't restart after a stop", "it refuses to come back up after the weekend shutdown"],
        ["the failure to restart", "it not restarting after a stop"],
        ["won't restart"],
        ["it fails to start once it has been stopped", "nothing happens when we press start"],
        ["the start failures", "the dead start button"],
        ["start failure"],
    ),
    "belt_slip": _v(
        ["the drive belt is slipping", "the belt squeals and slips under load"],
        ["the slipping belt", "the belt slip"],
        ["belt slipping"],
        ["the belt loses grip when it's loaded", "the belt glazes and slides on the pulley"],
        ["the belt losing grip", "the worn belt"],
        ["belt slip"],
    ),
    "drive_fault": _v(
        ["the drive panel shows a fault code", "the VFD keeps throwing a fault"],
        ["the drive fault code", "the fault on the drive panel"],
        ["drive fault"],
        ["the inverter flashes an error and stops", "the frequency converter faults out"],
        ["the inverter error", "the converter fault"],
        ["inverter error"],
    ),
}

# Tasks: noun phrases with their article ("the bearing replacement").
_TASKS = {
    "bearing_swap": _v(
        ["the bearing replacement", "the bearing swap"],
        ["replacing the bearings", "the bearing job"],
        ["bearing replacement"],
        ["the bearing changeout", "the new bearings"],
        ["fitting new bearings", "the bearing work"],
        ["bearing swap"],
    ),
    "seal_swap": _v(
        ["the seal replacement", "the new seal kit"],
        ["replacing the seal", "the seal kit job"],
        ["seal replacement"],
        ["the seal changeout", "the mechanical seal swap"],
        ["changing the seal", "the seal work"],
        ["seal swap"],
    ),
    "alignment": _v(
        ["the shaft alignment check", "the alignment re-check"],
        ["aligning the shaft", "the alignment job"],
        ["shaft alignment"],
        ["the laser alignment", "the motor-to-shaft realignment"],
        ["the alignment work", "lining up the shaft"],
        ["alignment"],
    ),
    "oil_change": _v(
        ["the oil change", "the oil drain and refill"],
        ["changing the oil", "the lube oil change"],
        ["oil change"],
        ["the oil swap", "the fresh oil fill"],
        ["replacing the lubricant", "the new oil"],
        ["oil swap"],
    ),
    "vibration_survey": _v(
        ["the vibration survey", "the vibration readings round"],
        ["measuring the vibration", "the vibration measurements"],
        ["vibration survey"],
        ["the vibration analysis", "the vibration route"],
        ["the vibration check", "analysing the vibration"],
        ["vibration check"],
    ),
    "filter_change": _v(
        ["the filter change", "the filter replacement"],
        ["changing the filters", "the new filters"],
        ["filter change"],
        ["the filter swap", "the fresh filter elements"],
        ["the filter elements", "replacing the filters"],
        ["filters"],
    ),
    "belt_swap": _v(
        ["the belt replacement", "the new belt"],
        ["replacing the belt", "the belt job"],
        ["belt replacement"],
        ["the belt changeout", "the belt swap"],
        ["changing the belts", "the belts"],
        ["belt swap"],
    ),
    "motor_rewind": _v(
        ["the motor rewind", "the motor rewinding job"],
        ["rewinding the motor", "the motor repair"],
        ["motor rewind"],
        ["the motor shop job", "getting the motor rewound"],
        ["the motor rewinding", "the motor overhaul"],
        ["motor rewinding"],
    ),
    "sensor_calibration": _v(
        ["the sensor calibration", "the calibration of the sensors"],
        ["calibrating the instruments", "the calibration"],
        ["sensor calibration"],
        ["the instrument calibration", "the check of the sensors against the reference"],
        ["the sensor check", "the calibration round"],
        ["calibration"],
    ),
    "coupling_check": _v(
        ["the coupling inspection", "the coupling check"],
        ["inspecting the coupling", "the coupling job"],
        ["coupling inspection"],
        ["the coupling look-over", "the coupling guard inspection"],
        ["the coupling", "looking at the coupling"],
        ["coupling check"],
    ),
    "firmware_update": _v(
        ["the drive firmware update", "the firmware update on the drive"],
        ["the firmware upgrade", "flashing the new firmware"],
        ["firmware update"],
        ["the controller software update", "the drive patch"],
        ["the software update", "the drive update"],
        ["drive software"],
    ),
    "safety_inspection": _v(
        ["the annual safety inspection", "the yearly safety check"],
        ["the safety inspection", "the annual inspection"],
        ["safety inspection"],
        ["the statutory inspection", "the yearly safety walkdown"],
        ["the safety walkdown", "the compliance inspection"],
        ["annual inspection"],
    ),
}

# Products checked by QC: plural nouns without article.
_PRODUCTS = {
    "gaskets": _v(
        ["gaskets", "flange gaskets"],
        ["gaskets"],
        ["gaskets"],
        ["gasket rings"],
        ["gasket rings", "gaskets"],
        ["gasket"],
    ),
    "housings": _v(
        ["housings", "motor housings"],
        ["housings"],
        ["housings"],
        ["casings"],
        ["casings", "housing parts"],
        ["casings"],
    ),
    "brackets": _v(
        ["brackets", "mounting brackets"],
        ["brackets"],
        ["brackets"],
        ["mounting plates"],
        ["mounting plates", "brackets"],
        ["mounting plates"],
    ),
    "caps": _v(
        ["bottle caps", "screw caps"],
        ["caps"],
        ["caps"],
        ["closures"],
        ["closures", "bottle closures"],
        ["closures"],
    ),
    "pellets": _v(
        ["pellets", "resin pellets"],
        ["pellets"],
        ["pellets"],
        ["granulate"],
        ["granulate", "plastic granulate"],
        ["granulate"],
    ),
    "fittings": _v(
        ["hose fittings", "fittings"],
        ["hose fittings"],
        ["fittings"],
        ["connectors"],
        ["hose connectors", "connectors"],
        ["connectors"],
    ),
    "end_caps": _v(
        ["end caps", "tube end caps"],
        ["end caps"],
        ["end caps"],
        ["end plugs"],
        ["end plugs", "tube plugs"],
        ["end plugs"],
    ),
    "bushings": _v(
        ["bushings", "bronze bushings"],
        ["bushings"],
        ["bushings"],
        ["sleeves"],
        ["sleeves", "bushing sleeves"],
        ["sleeves"],
    ),
    "cartridges": _v(
        ["filter cartridges", "cartridges"],
        ["filter cartridges"],
        ["cartridges"],
        ["filter inserts"],
        ["filter inserts", "inserts"],
        ["filter inserts"],
    ),
    "glands": _v(
        ["cable glands", "glands"],
        ["cable glands"],
        ["cable glands"],
        ["cable entries"],
        ["cable entries", "cable entry fittings"],
        ["cable entries"],
    ),
}

# Decisions: "fact" a verb phrase after "decided to", "q" a noun phrase.
_TOPICS = {
    "replace_not_repair": _v(
        [
            "replace the whole unit instead of repairing it",
            "buy a new unit rather than fix the old one",
        ],
        ["replacing it instead of repairing", "the replace-versus-repair question"],
        ["replace vs repair"],
        ["scrap the old unit and order a new one", "stop patching it and replace it"],
        ["swapping in a new unit", "retiring the old unit for a new one"],
        ["replacement decision"],
    ),
    "quarterly_pm": _v(
        [
            "move it to quarterly preventive maintenance",
            "service it every three months from now on",
        ],
        ["the quarterly maintenance schedule", "moving to maintenance every quarter"],
        ["quarterly PM"],
        [
            "put it on a three-month service interval",
            "tighten the service plan to four visits a year",
        ],
        ["the three-month service interval", "the new service frequency"],
        ["service interval"],
    ),
    "synthetic_oil": _v(
        ["switch it to synthetic oil", "use synthetic lubricant from now on"],
        ["the switch to synthetic lubricant", "synthetic oil"],
        ["synthetic oil"],
        ["change over to a synthetic lube", "drop mineral oil in favour of synthetic"],
        ["the lubricant change", "going synthetic"],
        ["lubricant switch"],
    ),
    "spare_motor": _v(
        ["keep a spare motor on the shelf", "buy a spare motor to keep in stores"],
        ["keeping a spare motor", "the spare motor"],
        ["spare motor"],
        ["stock a backup motor", "hold a second motor in the storeroom"],
        ["the backup motor", "stocking a replacement motor"],
        ["backup motor"],
    ),
    "defer_overhaul": _v(
        ["push the overhaul to the summer shutdown", "postpone the overhaul until the summer"],
        ["postponing the overhaul", "delaying the overhaul"],
        ["overhaul postponed"],
        [
            "wait with the major overhaul until the shutdown",
            "shift the rebuild to the next shutdown window",
        ],
        ["the overhaul date", "moving the rebuild"],
        ["overhaul timing"],
    ),
    "vibration_sensor": _v(
        ["fit a permanent vibration sensor", "install online vibration monitoring"],
        ["the vibration sensor", "adding vibration monitoring"],
        ["vibration sensor"],
        ["wire in a continuous vibration monitor", "put a wireless vibration probe on it"],
        ["continuous vibration monitoring", "the vibration probe"],
        ["vibration monitoring"],
    ),
    "reduced_speed": _v(
        ["run it at reduced speed for now", "limit it to eighty percent speed"],
        ["running at reduced speed", "the speed limit"],
        ["reduced speed"],
        ["derate it until the parts arrive", "keep it throttled back for the time being"],
        ["derating it", "the throttled operation"],
        ["derating"],
    ),
    "vendor_rebuild": _v(
        ["send the rebuild out to the vendor", "let the manufacturer do the rebuild"],
        ["outsourcing the rebuild", "the vendor rebuild"],
        ["vendor rebuild"],
        ["contract out the repair", "have an outside shop rebuild it"],
        ["the outside repair", "contracting the rebuild"],
        ["external repair"],
    ),
    "firmware": _v(
        ["upgrade the controller firmware", "put the latest firmware on the controller"],
        ["the firmware upgrade", "updating the controller"],
        ["controller firmware"],
        ["patch the control software", "move the controller to the new software release"],
        ["the software patch", "the control software release"],
        ["software release"],
    ),
    "retire": _v(
        ["retire it at the end of the year", "decommission it in December"],
        ["retiring it", "the decommissioning"],
        ["decommission"],
        ["take it out of service for good at year end", "phase it out by the new year"],
        ["phasing it out", "taking it out of service"],
        ["phase-out"],
    ),
}

VOCAB = {"symptom": _SYMPTOMS, "task": _TASKS, "product": _PRODUCTS, "topic": _TOPICS}

# ---------------------------------------------------------------------------------------------
# Family A: chatty, full sentences.

_A = {
    "greet": [
        "Morning!",
        "Hi there.",
        "Hey, quick one.",
        "Good afternoon.",
        "Hello again.",
        "Hi, hope you're well.",
        "Hey!",
    ],
    "small": [
        "The weather finally cleared up, so I actually cycled in today.",
        "{P1} brought in cinnamon rolls for the whole shift and they were gone in ten minutes.",
        "Long week so far, I'm looking forward to a quiet weekend with the kids.",
        "The coffee machine on the second floor is broken again, which explains everyone's mood.",
        "I spent the morning in a safety refresher course, it was surprisingly useful.",
        "Traffic on the ring road was terrible this morning.",
        "{P1} and {P2} are arguing about football again, it's been going on since breakfast.",
        "We had a fire drill at the {site2} earlier and it took forty minutes to get everyone back in.",
        "Did I mention {P1} is off on holiday next week?",
        "The canteen had lasagna today, not bad at all.",
        "I think I'm finally getting used to the early shift.",
        "It's been raining all day here, the car park is basically a lake.",
        "{P1} is organizing a bowling night for the team on {day}.",
        "My daughter has a school play on {day}, so I'm leaving early.",
        "The new badge readers at the gate keep rejecting my card.",
        "Budget season again, so everyone is counting spare parts.",
        "{P2} finally got the promotion and we're all pretty happy about it.",
        "I tried that ramen place near the {site2} yesterday and would recommend it.",
        "The heating in the office is either off or tropical, nothing in between.",
        "Quiet night shift for once, I even had time to clean my desk.",
    ],
    "a_small": [
        "Ha, thanks for sharing. I hope the rest of the day treats you well. What's on your list?",
        "Sounds like a lively day over there. Let me know what I can help with.",
        "Fair enough, every week has a few of those. What do you need from me today?",
        "Good to hear from you. Anything you want me to keep track of?",
        "That made me smile. I'm here whenever you need a hand with notes or drafts.",
        "Thanks for the update. How are things on the floor otherwise?",
        "Noted, and good luck with that. What's next on your plate?",
    ],
    "a_offer": [
        "By the way, I can keep a running list of open items for you if that helps.",
        "Just say the word if you want a summary of this week's notes.",
        "Let me know if you need anything else written down.",
        "I can also draft the handover note for the next shift if you like.",
        "Anything else I should note for you?",
    ],
    "chatter": [
        "By the way, {oeq} at the {osite} is back in service after the shutdown.",
        "{P1} said the {okind} {oeq} got a fresh coat of paint and looks brand new.",
        "The auditors walked past {oeq} today and asked a lot of questions about the guarding.",
        "We moved the spare parts cabinet next to {oeq}, in case you're looking for it.",
        "The {okind} {oeq} ran the whole night without a hiccup.",
        "The {osite} crew finished the housekeeping round around {oeq}.",
        "Someone left the panel door open on {oeq} again, nothing serious.",
        "{oeq} at the {osite} is due for a routine look next month, nothing urgent.",
        "The label on the {okind} {oeq} is missing, we need to print a new one.",
        "{P2} took some photos of {oeq} for the new training slides.",
    ],
    "a_chatter": [
        "Good to hear about {oeq}.",
        "Noted about {oeq}, thanks for the heads-up.",
        "Thanks, I'll remember that about {oeq}.",
        "Sounds like {oeq} is in decent shape then.",
        "Okay, good to know where things stand with {oeq}.",
    ],
    "fact": {
        "ticket": [
            "Quick update from the {site}: on the {kind} {eq} {attr}. Ticket {ans} is open.",
            "{P1} called from the {site}, {attr} on the {kind} {eq}, so we opened ticket {ans}.",
            "The {kind} {eq} at the {site} again: {attr}. I logged it as ticket {ans} and it's still open.",
            "Ticket {ans} is open for the {kind} {eq} at the {site}, because {attr}.",
            "For my notes: {eq} ({kind}, {site}), {attr}. It's tracked in ticket {ans}, status open.",
        ],
        "reject_rate": [
            "QC finished checking the {attr} batch from the {kind} {eq} at the {site}, and the reject rate came out at {ans}.",
            "The quality check on {attr} off the {kind} {eq} ({site}) showed {ans} rejects.",
            "{P1} sent me the QC numbers: {attr} from {eq} at the {site}, {ans} rejected. That's the {kind} they recalibrated last month.",
            "Reject rate for the {attr} made on the {kind} {eq} at the {site} was {ans} in the last quality check.",
        ],
        "owner": [
            "{Owner} is taking {attr} on the {kind} {eq} at the {site}.",
            "We agreed that {owner} owns {attr} for {eq}, the {kind} at the {site}.",
            "{P1} assigned {attr} on the {kind} {eq} at the {site} to {owner}.",
            "Just so it's written down: {attr} on the {site} {kind} {eq} is {owner}'s job now.",
        ],
        "decision": [
            "For the {kind} {eq} at the {site} we decided to {attr}, and it's recorded as decision {ans}.",
            "Decision {ans} is in: for {eq}, the {kind} at the {site}, we'll {attr}.",
            "{P1} signed off {ans} today, so for the {kind} {eq} at the {site} we {attr}.",
            "The meeting about the {site} {kind} {eq} ended with a decision to {attr}. It's filed as {ans}.",
        ],
    },
    "late": [
        "Oh, one more thing before I forget.",
        "Also, something for the record.",
        "Last thing, I promise.",
        "One more before I go.",
    ],
    "followup": [
        "Can you remind me to chase it on {day}?",
        "Please keep that in my notes for the weekly review.",
        "Could you help me write a short update for {P1} later?",
        "Put it on my list for the {day} meeting.",
    ],
    "a_followup": [
        "Sure, it's on your list.",
        "Will do, I'll bring it up when you ask.",
        "Done, it's in your notes.",
        "Got it, I'll keep it handy.",
    ],
    "ack": {
        "ticket": [
            "Got it: {ans} for {eq}, still open. I'll keep it on the list.",
            "Noted. I'll keep an eye on {ans}.",
            "Thanks, I've written down the ticket for {eq}.",
        ],
        "reject_rate": [
            "Thanks, I've noted {ans} for that batch.",
            "Noted. That's the kind of number worth watching.",
            "Okay, I've written down the QC result for {eq}.",
        ],
        "owner": [
            "Great, so {owner} has it. Noted.",
            "Noted, I'll remember who's on it.",
            "Okay, {owner} it is.",
        ],
        "decision": [
            "Recorded: {ans}.",
            "Good to have that settled. I noted the reference.",
            "Okay, noted the decision for {eq}.",
        ],
    },
    "advice": {
        "ticket": [
            "If it comes back after the repair, it may be worth checking the mounting bolts and the coupling as well.",
            "While the ticket is open, it might help to log the readings once per shift so the technician can see the trend.",
            "Worth asking stores whether the parts are in stock, so the job doesn't sit waiting.",
        ],
        "reject_rate": [
            "It might be worth comparing it with the previous batches before drawing conclusions.",
            "If the rate stays like that, a look at the tooling and the raw material lot could explain it.",
            "I can put together a small table of the recent QC results if you want to see the trend.",
        ],
        "owner": [
            "I can draft a checklist for the job if that helps whoever does it.",
            "It may help to agree on a date, so the work doesn't drift into the next month.",
            "Let me know when it's done and I'll mark it off.",
        ],
        "decision": [
            "If you want, I can summarize the reasoning for the minutes.",
            "It might be worth telling the shift leads, so nobody is surprised.",
            "I'll keep the reference handy in case procurement asks.",
        ],
    },
    "split_problem": {
        "ticket": [
            "The {kind} {eq} at the {site} is giving us trouble: {attr}.",
            "Bad news from the {site}, on the {kind} {eq} {attr}.",
        ],
        "reject_rate": [
            "QC looked at the {attr} from the {kind} {eq} at the {site} today.",
            "We finally got the quality check back for the {attr} run on the {kind} {eq} at the {site}.",
        ],
        "owner": [
            "We needed someone for {attr} on the {kind} {eq} at the {site}, so we talked it through today.",
            "{Attr} on the {kind} {eq} at the {site} came up in the planning meeting.",
        ],
        "decision": [
            "We finally settled what to do with the {kind} {eq} at the {site}: {attr}.",
            "The long discussion about the {kind} {eq} at the {site} is over, we'll {attr}.",
        ],
    },
    "split_ask": {
        "ticket": [
            "That sounds annoying. Is there a ticket for it yet?",
            "Ugh, that again. Has anyone logged it in the system?",
        ],
        "reject_rate": [
            "Oh, and how did the batch do in the end?",
            "What did the numbers look like this time around?",
        ],
        "owner": [
            "Makes sense to settle that. Who ended up taking it?",
            "So who is actually doing it in the end?",
        ],
        "decision": [
            "Good to have that settled. Did it get a decision record?",
            "Is that written down somewhere official, with a reference?",
        ],
    },
    "split_answer": {
        "ticket": [
            "Yes, {P1} opened {ans} this morning and it's still open.",
            "Ticket {ans}, opened today. Still waiting for parts.",
        ],
        "reject_rate": [
            "Not great, {ans} rejects. {P1} wants to review it.",
            "The reject rate was {ans}, which is what I expected to be honest.",
        ],
        "owner": [
            "{Owner} did, {P1} confirmed it with the supervisor.",
            "{Owner} volunteered, which surprised everyone.",
        ],
        "decision": [
            "It did, {ans}. {P1} filed it.",
            "Yes, decision {ans}, signed off this afternoon.",
        ],
    },
    "close": [
        "Anyway, that's all for now, thanks!",
        "Okay, back to work. Thanks for the help.",
        "Thanks, talk later.",
        "That's it from me for today.",
    ],
    "a_close": [
        "Anytime. Have a good rest of your shift!",
        "You're welcome, talk soon.",
        "Sure thing. Good luck with the rest of the day.",
        "Happy to help. See you next time.",
    ],
    "spare_ticket": [
        "Also, the forklift charger ticket {mt} finally got closed.",
        "IT closed {mt} for the label printer, about time.",
        "The badge reader problem is tracked as {mt}, still waiting on security.",
    ],
    "spare_decision": [
        "HR filed the new overtime rules as {dr}.",
        "The parking rota change went through as {dr}, so no more reserved spots.",
    ],
    "target_id": ["{kind} {eq}", "the {kind} {eq}"],
    "target_site": ["the {kind} at the {site}", "the {site} {kind}"],
    "short_id": ["{eq}", "{eq} {kind}"],
    "short_site": ["{site} {kind}"],
    "q_long": {
        "ticket": [
            "Which work order number was raised for {attr} on {target}?",
            "What was the ticket number for {attr} on {target}?",
            "Can you find the work order we opened for {attr} on {target}?",
        ],
        "reject_rate": [
            "What reject rate did the quality check find on the {attr} from {target}?",
            "How many of the {attr} from {target} failed QC, as a percentage?",
            "What was the QC reject rate for the {attr} batch off {target}?",
        ],
        "owner": [
            "Who is responsible for {attr} on {target}?",
            "Who took on {attr} for {target}?",
            "Which person owns {attr} on {target}?",
        ],
        "decision": [
            "Which decision record covers {attr} for {target}?",
            "Under which decision reference did we agree on {attr} for {target}?",
            "What's the reference of the decision about {attr} on {target}?",
        ],
    },
    "q_short": {
        "ticket": ["{target_s} {attr_s} work order", "{target_s} {attr_s} ticket number"],
        "reject_rate": ["{target_s} {attr_s} reject rate", "{attr_s} QC rejects {target_s}"],
        "owner": ["{target_s} {attr_s} owner", "who owns {attr_s} {target_s}"],
        "decision": ["{target_s} {attr_s} decision", "decision record {attr_s} {target_s}"],
    },
}

# ---------------------------------------------------------------------------------------------
# Family B (held out): terse notes, other small talk, other question wordings.

_B = {
    "greet": ["Hi.", "Yo.", "Evening.", "Hello!", "Hey, got a minute?", "Afternoon."],
    "small": [
        "Gym before work today, my legs are not happy.",
        "Just finished a podcast about deep sea mining, weird stuff.",
        "The new hire started on {day} and already knows everyone's name.",
        "Office move is next month, boxes everywhere.",
        "Someone parked in my spot again.",
        "{P1} had a birthday, so there was cake in the break room.",
        "Drizzle all week, can't wait for some sun.",
        "Back from the trade fair, my feet hurt from walking the halls.",
        "Our cat knocked my phone into the sink last night.",
        "Halfway through a thriller {P2} lent me, can't put it down.",
        "{P2} is running the half marathon on {day}, we should all cheer.",
        "The vending machine ate my coins again.",
        "Power cut at home yesterday, dinner by candlelight.",
        "Shift swap with {P1} worked out, so I have {day} off.",
        "There was a deer on the access road to the {site2} this morning.",
        "New safety boots, still breaking them in.",
        "{P1} keeps humming the same song all day, send help.",
        "Snow forecast for the weekend, apparently.",
    ],
    "a_small": [
        "Ha, that's a story. Okay, what's up today?",
        "Understood. What do you need from me right now?",
        "Noted. Anything for me to log or track?",
        "Right, fair enough. Go ahead, I'm listening.",
        "Sounds like a day. What's on your list?",
        "Okay. Want me to write anything down for you?",
    ],
    "a_offer": [
        "Need a summary of today's notes later?",
        "Say the word if you want a list of open items.",
        "I can draft the shift handover note too, if useful.",
        "Anything else you want logged while we're at it?",
    ],
    "chatter": [
        "{oeq} at the {osite}: new guard fitted, looks tidy.",
        "The {okind} {oeq} got moved two metres to make room for the pallet lane.",
        "{P1} says {oeq} sounds fine after the cleanup.",
        "Photos of {oeq} are in the shared drive now.",
        "The {osite} team wants {oeq} on the tour route for visitors.",
        "Somebody put a sticky note on {oeq} saying 'don't touch', no idea why.",
        "{oeq} was idle most of the day, low demand.",
        "The {okind} {oeq} at the {osite} got a new nameplate.",
        "Walked by {oeq}, all quiet.",
    ],
    "a_chatter": [
        "Okay, {oeq} noted.",
        "Fine, nothing to do about {oeq} then.",
        "Good, {oeq} sounds stable.",
        "Thanks. Logged that for {oeq}.",
    ],
    "fact": {
        "ticket": [
            "{eq} at the {site} acting up, {attr}. Raised {ans} against the {kind}, open.",
            "Logged {ans} today. Reason: {attr}, on the {site} {kind} {eq}.",
            "Maintenance has {ans} in the queue for {eq}, since {attr}. That's the {kind} at the {site}.",
            "New job {ans}, status open: {kind} {eq}, {site}, {attr}.",
        ],
        "reject_rate": [
            "Inspection results in: {ans} of the {attr} run on the {site} {kind} {eq} failed.",
            "{eq} {attr} lot didn't look great, {ans} scrapped at final inspection. It's the {kind} at the {site}.",
            "Out of the last lot of {attr} from the {kind} {eq} at the {site}, {ans} went to the reject bin.",
        ],
        "owner": [
            "{Attr} on {eq} ({site} {kind}) goes to {owner}.",
            "Put {owner} down for {attr} on the {kind} {eq} at the {site}.",
            "{Owner} volunteered for {attr}, {site}, {kind} {eq}.",
        ],
        "decision": [
            "Logged {ans}: for the {site} {kind} {eq} we {attr}.",
            "Management approved {ans}, meaning we {attr} on {eq}, the {kind} at the {site}.",
            "Final call on {eq} at the {site}: {attr}. Reference {ans}, filed under the {kind} folder.",
        ],
    },
    "late": ["Oh, and one more.", "Another one.", "Also, this.", "Almost forgot."],
    "followup": [
        "Flag it for {day}.",
        "Add to the weekly summary.",
        "Ping me about it {day}.",
        "Keep it for the report.",
    ],
    "a_followup": ["Flagged.", "Added.", "Okay, will ping you.", "Kept."],
    "ack": {
        "ticket": ["Okay, {ans} noted for {eq}.", "Noted, open job on {eq}.", "Got it, {ans}."],
        "reject_rate": ["{ans}, noted.", "Ouch. Noted for {eq}.", "Okay, inspection result saved."],
        "owner": ["{Owner}, noted.", "Okay, assignee saved.", "Got it, {owner} on {eq}."],
        "decision": ["{ans} noted.", "Okay, decision saved for {eq}.", "Noted the reference."],
    },
    "advice": {
        "ticket": ["Check the mounting too if it recurs.", "Log readings each shift meanwhile."],
        "reject_rate": ["Compare with last lots.", "Could be the raw material."],
        "owner": ["Want a checklist for it?", "Set a date so it doesn't slip."],
        "decision": ["Tell the shift leads.", "Want it in the minutes?"],
    },
    "split_problem": {
        "ticket": [
            "{Kind} {eq} at the {site}: {attr}.",
            "Trouble on {eq} at the {site}, {attr}. It's the {kind}.",
        ],
        "reject_rate": [
            "Inspection checked the {attr} off the {kind} {eq} at the {site}.",
            "Final inspection ran on the {attr} lot from {eq}, the {site} {kind}.",
        ],
        "owner": [
            "{Attr} on the {kind} {eq}, {site}: sorted out who does it.",
            "Needed a name for {attr} on {eq} at the {site}. It's the {kind}.",
        ],
        "decision": [
            "Settled the {kind} {eq} at the {site}: we {attr}.",
            "Meeting on {eq} at the {site} done. Outcome: {attr}. The {kind}, I mean.",
        ],
    },
    "split_ask": {
        "ticket": [
            "Annoying. Job number for it, if there is one?",
            "Did it get a work order yet, or not?",
        ],
        "reject_rate": [
            "And the result? How many failed the check?",
            "How bad was it? What's the failure rate there?",
        ],
        "owner": [
            "Okay, and who is going to be on it then?",
            "Fine. Whose name went on that job in the end?",
        ],
        "decision": [
            "Right. Is there a DR number for it already?",
            "Okay. Was the decision filed with a reference number?",
        ],
    },
    "split_answer": {
        "ticket": ["{ans}, open, waiting on parts.", "Yes, {ans}. {P1} raised it."],
        "reject_rate": ["{ans} rejected, not good.", "{ans} of the lot failed."],
        "owner": ["{Owner}, confirmed by {P1}.", "{Owner}. Starts {day}."],
        "decision": ["{ans}, signed today.", "Yes, {ans}. {P1} has the paperwork."],
    },
    "close": ["That's all.", "Done for now.", "Cheers.", "Ok, bye."],
    "a_close": ["Bye!", "Later.", "Okay, see you.", "Cheers."],
    "spare_ticket": [
        "Side note: {mt} for the broken canteen fridge is done.",
        "Facilities still hasn't touched {mt}, the leaky roof in the locker room.",
        "{mt} for the office aircon got closed.",
    ],
    "spare_decision": [
        "Also {dr} made the new shift pattern official.",
        "Travel policy is now {dr}, fewer trips.",
    ],
    "target_id": ["{eq}", "{kind} {eq}", "{eq}, the {kind}"],
    "target_site": ["the {kind} over at the {site}", "the {kind} down at the {site}"],
    "short_id": ["{eq}", "{kind} {eq}"],
    "short_site": ["{kind} {site}", "{site} {kind}"],
    "q_long": {
        "ticket": [
            "I need the maintenance request number for {attr} affecting {target}. What was it?",
            "What WO did we log against {target} for {attr}?",
            "Remember {attr} with {target}? What number did that job get?",
        ],
        "reject_rate": [
            "What share of the {attr} from {target} got rejected at inspection?",
            "When inspection checked the {attr} made on {target}, what was the failure percentage?",
            "How bad was the scrap rate on the {attr} lot from {target}?",
        ],
        "owner": [
            "Whose name is on {attr} for {target}?",
            "Who did we assign to {attr} on {target}?",
            "Remind me who's doing {attr} on {target}.",
        ],
        "decision": [
            "What's the DR number for the call we made on {attr} for {target}?",
            "Which recorded decision is about {attr} on {target}?",
            "We agreed something about {attr} for {target}. What was the reference?",
        ],
    },
    "q_short": {
        "ticket": ["WO {target_s} {attr_s}", "{attr_s} {target_s} job number"],
        "reject_rate": ["inspection failures {attr_s} {target_s}", "{target_s} {attr_s} scrap %"],
        "owner": ["assignee {attr_s} {target_s}", "{target_s} {attr_s} who"],
        "decision": ["{target_s} {attr_s} DR", "decision ref {attr_s} {target_s}"],
    },
}

FAMILIES = {"A": _A, "B": _B}
