B
pos_weightJ(9ÍÄø‹ô?×®½	wÀó?Hf£`p°@l_&v@Vå 7¯h@